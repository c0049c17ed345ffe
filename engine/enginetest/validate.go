package enginetest

import (
	"fmt"
	"math"

	"superfluid/engine"
)

// validate refuses what native/tick.cpp's validate refuses, check for
// check and in its order, so that a plan gets the same verdict (status,
// blamed lane) from the fake as from the real engine. A refusal of one
// lane's entry blames that lane; a refusal of the plan as a whole (too
// many lanes, a step over the batch) blames none. Two rules of the native
// validate have no counterpart: arrays with a count but no data, and
// event buffers too small for the plan, which Go slices and the cgo
// binding's sizing rule out. One check is the fake's own: a sequence
// whose cached tokens differ from the admit's prompt (the real engine
// cannot see token identities in its KV cache), which catches a cache
// that hands out the wrong prefix.
func (e *Fake) validate(p *engine.Plan) error {
	if err := engine.CheckLoRAScales(p.LoRA, e.desc.LoRA); err != nil {
		return fail(engine.StatusInvalid, "plan: %v", err)
	}
	for i, tag := range p.Retires {
		if e.lanes[tag] == nil {
			return failLane(engine.StatusUnknownLane, tag, "retire: unknown lane %d", tag)
		}
		for _, r := range p.Retires[:i] {
			if r == tag {
				return failLane(engine.StatusInvalid, tag, "retire: lane %d twice", tag)
			}
		}
	}
	if live := len(e.lanes) - len(p.Retires); live+len(p.Admits) > e.desc.Lanes {
		return fail(engine.StatusInvalid, "admit: %d lanes would exceed the engine's %d", live+len(p.Admits), e.desc.Lanes)
	}
	for i := range p.Admits {
		a := &p.Admits[i]
		if e.lanes[a.Lane] != nil && !retired(p, a.Lane) {
			return failLane(engine.StatusLaneExists, a.Lane, "admit: lane %d is already admitted", a.Lane)
		}
		for _, b := range p.Admits[:i] {
			if b.Lane == a.Lane {
				return failLane(engine.StatusLaneExists, a.Lane, "admit: lane %d twice", a.Lane)
			}
			if b.Seq == a.Seq {
				return failLane(engine.StatusSeqBusy, a.Lane, "admit: sequence %d twice", a.Seq)
			}
		}
		if err := e.checkAdmit(p, a); err != nil {
			return err
		}
	}
	rows := 0
	for i := range p.Prefills {
		f := &p.Prefills[i]
		a := admitted(p, f.Lane)
		var l *lane
		if a == nil && !retired(p, f.Lane) {
			l = e.lanes[f.Lane]
		}
		if a == nil && l == nil {
			return failLane(engine.StatusUnknownLane, f.Lane, "prefill: unknown lane %d", f.Lane)
		}
		plen, done := 0, 0
		if a != nil {
			plen, done = int(a.PromptLen), int(a.Cached)
		} else {
			plen, done = len(l.prompt), l.prefilled
		}
		if f.Count == 0 || uint64(f.Offset)+uint64(f.Count) > uint64(plen) {
			return failLane(engine.StatusPastPrompt, f.Lane, "prefill lane %d: [%d, +%d) outside its %d-token prompt", f.Lane, f.Offset, f.Count, plen)
		}
		if int(f.Offset) != done {
			return failLane(engine.StatusInvalid, f.Lane, "prefill lane %d: starts at %d, its prompt continues at %d", f.Lane, f.Offset, done)
		}
		for _, g := range p.Prefills[:i] {
			if g.Lane == f.Lane {
				return failLane(engine.StatusInvalid, f.Lane, "prefill: lane %d twice", f.Lane)
			}
		}
		rows += int(f.Count)
	}
	for i := range p.Decodes {
		d := &p.Decodes[i]
		a := admitted(p, d.Lane)
		var l *lane
		if a == nil && !retired(p, d.Lane) {
			l = e.lanes[d.Lane]
		}
		if a == nil && l == nil {
			return failLane(engine.StatusUnknownLane, d.Lane, "decode: unknown lane %d", d.Lane)
		}
		if a != nil {
			return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: admitted in this plan, not prefilled", d.Lane)
		}
		if l.finish != engine.FinishNone {
			return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: the lane has finished", d.Lane)
		}
		for _, g := range p.Decodes[:i] {
			if g.Lane == d.Lane {
				return failLane(engine.StatusInvalid, d.Lane, "decode: lane %d twice", d.Lane)
			}
		}
		if !l.hasPending {
			return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: its prompt is not prefilled", d.Lane)
		}
		if err := e.checkDraft(p, d, l); err != nil {
			return err
		}
		rows += 1 + int(d.DraftLen)
	}
	if rows > e.desc.Batch {
		return fail(engine.StatusBatch, "step of %d tokens exceeds the batch of %d", rows, e.desc.Batch)
	}
	// The native engine builds the admitted lanes' samplers last, checking
	// their sampling and logit bias as it goes.
	for i := range p.Admits {
		if err := e.checkSampling(p, &p.Admits[i]); err != nil {
			return err
		}
		if err := e.checkGrammar(&p.Admits[i]); err != nil {
			return err
		}
	}
	return nil
}

// checkGrammar is what native sf_lane_build_grammar refuses without
// reading the grammar: a replay without a grammar or past the prompt, and
// an id no AcquireGrammar returned (or one since dropped). The fake treats
// a grammar as opaque, so it never refuses a replay for its tokens.
func (e *Fake) checkGrammar(a *engine.Admit) error {
	if a.Grammar == 0 {
		if a.GrammarReplay != 0 {
			return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: grammar replay without a grammar", a.Lane)
		}
		return nil
	}
	if a.GrammarReplay > a.PromptLen {
		return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: grammar replay of %d tokens past its %d-token prompt", a.Lane, a.GrammarReplay, a.PromptLen)
	}
	if !e.grammars.Known(a.Grammar) {
		return failLane(engine.StatusGrammar, a.Lane, "admit lane %d: unknown grammar %d", a.Lane, a.Grammar)
	}
	return nil
}

// checkAdmit is native check_admit.
func (e *Fake) checkAdmit(p *engine.Plan, a *engine.Admit) error {
	if !e.seqOK(a.Seq) {
		return failLane(engine.StatusSeqRange, a.Lane, "admit lane %d: sequence %d outside [0, %d)", a.Lane, a.Seq, len(e.seqs))
	}
	if o := e.seqOwner[a.Seq]; o >= 0 && !retired(p, uint32(o)) {
		return failLane(engine.StatusSeqBusy, a.Lane, "admit lane %d: sequence %d carries lane %d", a.Lane, a.Seq, o)
	}
	if a.PromptLen == 0 {
		return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: empty prompt", a.Lane)
	}
	if uint64(a.PromptOff)+uint64(a.PromptLen) > uint64(len(p.Tokens)) {
		return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: prompt [%d, +%d) outside the plan's %d tokens", a.Lane, a.PromptOff, a.PromptLen, len(p.Tokens))
	}
	if int(a.PromptLen) > e.desc.Ctx {
		return failLane(engine.StatusContext, a.Lane, "admit lane %d: prompt of %d tokens exceeds the context of %d", a.Lane, a.PromptLen, e.desc.Ctx)
	}
	if a.Cached >= a.PromptLen {
		return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: %d cached tokens leave nothing of a %d-token prompt to prefill", a.Lane, a.Cached, a.PromptLen)
	}
	prompt := p.Tokens[a.PromptOff : a.PromptOff+a.PromptLen]
	held := e.seqs[a.Seq]
	if len(held) != int(a.Cached) {
		return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: sequence %d holds %d tokens, the plan says %d are cached", a.Lane, a.Seq, len(held), a.Cached)
	}
	for k, t := range held {
		// A media row's cell (RowToken, outside the vocabulary) stands
		// for the placeholder the prompt holds there.
		if t != prompt[k] && int(t) < e.desc.Vocab {
			return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: sequence %d differs from the prompt at %d (the fake's own check)", a.Lane, a.Seq, k)
		}
	}
	for k, t := range prompt {
		if t < 0 || int(t) >= e.desc.Vocab {
			return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: token %d at %d outside the vocabulary", a.Lane, t, k)
		}
	}
	if uint64(a.BiasOff)+uint64(a.BiasLen) > uint64(len(p.Biases)) {
		return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: logit bias outside the plan", a.Lane)
	}
	if a.Logprobs < 0 || a.Logprobs > engine.MaxLogprobs {
		return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: logprobs %d outside [0, %d]", a.Lane, a.Logprobs, engine.MaxLogprobs)
	}
	return nil
}

// MaxPenalty bounds the frequency and presence penalties the engine takes
// (native SF_MAX_PENALTY): beyond it the logits overflow.
const MaxPenalty = 1e6

// checkSampling is what native sf_lane_build_sampling refuses: sampling
// out of range (a temperature below engine.MinTemperature, NaN included,
// is greedy first), a logit bias for no token or of NaN, and a bias that
// bans every token.
func (e *Fake) checkSampling(p *engine.Plan, a *engine.Admit) error {
	s := a.Sampling
	s.Normalize()
	if why := samplingRefusal(&s); why != "" {
		return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: sampling refused: %s", a.Lane, why)
	}
	bias := p.Biases[a.BiasOff : a.BiasOff+a.BiasLen]
	for _, b := range bias {
		if b.Token < 0 || int(b.Token) >= e.desc.Vocab || math.IsNaN(float64(b.Bias)) {
			return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: logit bias for token %d is invalid", a.Lane, b.Token)
		}
	}
	if engine.BansEveryToken(bias, e.desc.Vocab) {
		return failLane(engine.StatusInvalid, a.Lane, "admit lane %d: the logit bias bans every token", a.Lane)
	}
	return nil
}

// samplingRefusal is native sampling_refusal: why s is refused, or "".
func samplingRefusal(s *engine.Sampling) string {
	finiteIn := func(v float32, lo, hi float64) bool {
		f := float64(v)
		return !math.IsNaN(f) && !math.IsInf(f, 0) && f >= lo && f <= hi
	}
	switch {
	case math.IsNaN(float64(s.Temperature)) || math.IsInf(float64(s.Temperature), 0):
		return "temperature is not finite"
	case s.TopK < 0:
		return "top_k is negative"
	case !finiteIn(s.TopP, 0, 1) || s.TopP == 0:
		return "top_p outside (0, 1]"
	case !finiteIn(s.MinP, 0, 1):
		return "min_p outside [0, 1]"
	case !finiteIn(s.RepeatPenalty, math.SmallestNonzeroFloat32, math.MaxFloat32):
		return "repeat_penalty is not a positive finite number"
	case !finiteIn(s.FrequencyPenalty, -MaxPenalty, MaxPenalty) || !finiteIn(s.PresencePenalty, -MaxPenalty, MaxPenalty):
		return "frequency or presence penalty outside [-1e6, 1e6]"
	case s.PenaltyLastN < -1:
		return "penalty_last_n below -1"
	}
	return ""
}

func retired(p *engine.Plan, tag uint32) bool {
	for _, r := range p.Retires {
		if r == tag {
			return true
		}
	}
	return false
}

func admitted(p *engine.Plan, tag uint32) *engine.Admit {
	for i := range p.Admits {
		if p.Admits[i].Lane == tag {
			return &p.Admits[i]
		}
	}
	return nil
}

func fail(st engine.Status, format string, args ...any) error {
	return &engine.Error{Status: st, Op: "tick", Msg: fmt.Sprintf(format, args...)}
}

// failLane is a refusal that blames lane tag.
func failLane(st engine.Status, tag uint32, format string, args ...any) error {
	return &engine.Error{Status: st, Op: "tick", Msg: fmt.Sprintf(format, args...), Lane: tag, HasLane: true}
}

// checkDraft is native/tick.cpp's check_draft: a model that refuses drafts
// (the descriptor's Drafts false), a draft longer than DraftMax, a draft
// outside the plan's tokens, past the context, or outside the vocabulary.
func (e *Fake) checkDraft(p *engine.Plan, d *engine.Decode, l *lane) error {
	if d.DraftLen == 0 {
		if d.SynthAccept > 0 {
			return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: synthetic accepts without a draft", d.Lane)
		}
		return nil
	}
	if !e.desc.Drafts {
		return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: a draft on a model that refuses drafts: %s", d.Lane, e.desc.DraftsRefused)
	}
	if e.desc.DraftMax > 0 && int(d.DraftLen) > e.desc.DraftMax {
		return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: a draft of %d passes the %d positions recurrent state rolls back", d.Lane, d.DraftLen, e.desc.DraftMax)
	}
	if uint64(d.DraftOff)+uint64(d.DraftLen) > uint64(len(p.Tokens)) {
		return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: draft [%d, +%d) outside the plan's %d tokens", d.Lane, d.DraftOff, d.DraftLen, len(p.Tokens))
	}
	// The sequence holds n_past tokens; the draft's rows follow the fed one.
	if uint64(len(e.seqs[l.seq]))+uint64(d.DraftLen) >= uint64(e.desc.Ctx) {
		return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: a draft of %d passes the context of %d", d.Lane, d.DraftLen, e.desc.Ctx)
	}
	for _, t := range p.Tokens[d.DraftOff : d.DraftOff+d.DraftLen] {
		if t < 0 || int(t) >= e.desc.Vocab {
			return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: draft token %d outside the vocabulary", d.Lane, t)
		}
	}
	if d.SynthAccept > d.DraftLen {
		return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: %d synthetic accepts of a draft of %d", d.Lane, d.SynthAccept, d.DraftLen)
	}
	if d.SynthAccept > 0 && l.grammar {
		return failLane(engine.StatusInvalid, d.Lane, "decode lane %d: synthetic accepts on a lane with a grammar", d.Lane)
	}
	return nil
}
