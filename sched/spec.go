package sched

import (
	"fmt"
	"time"

	"superfluid/engine"
)

// Speculative decoding: a decoding lane carries a draft — the tokens that
// followed the last time its latest tokens appeared (spec_ngram.go), or
// what a small draft model sharing the vocabulary predicts (spec_model.go)
// — as extra rows of the step, and the
// engine commits as many of them as the lane's own sampler agrees with,
// plus one token of the model's own (engine.Decode). The tokens are
// exactly those of a plain decode, for every lane (greedy or sampled,
// grammar, bias, penalties, logprobs): the engine samples each drafted row
// as a plain step would at that position, so drafts need no exception for
// any kind of request. Drafts ride only in decode-only steps (a prefill
// step is compute-bound already, and its time says nothing of the draft's
// cost), better classes first while the batch has room, only on engines
// whose decodes may carry drafts (engine.Descriptor.Drafts), and
// only while the lane's throughput gate (spec_gate.go) says they pay.

// SpecType names a draft source (llama-server's --spec-type).
type SpecType string

// Draft sources.
const (
	SpecNone        SpecType = "none"
	SpecNgramSimple SpecType = "ngram-simple"
	// SpecDraftSimple drafts with a second model (Speculation.Drafter).
	SpecDraftSimple SpecType = "draft-simple"
	// SpecDraftMTP drafts with the model's own multi-token prediction
	// layers (Speculation.Drafter, opened on the model itself).
	SpecDraftMTP SpecType = "draft-mtp"
)

// Speculation configures speculative decoding; the zero value is off.
type Speculation struct {
	// Type is the draft source; "" or SpecNone: no drafts.
	Type SpecType
	// DraftModel is the draft model's file, SpecDraftSimple's source
	// (--spec-draft-model): the owner opens it as Drafter.
	DraftModel string
	// DraftPMin: the drafter ends a draft at a token it gives less than
	// this probability (--spec-draft-p-min); 0: never.
	DraftPMin float64
	// Drafter drafts for SpecDraftSimple and SpecDraftMTP; New refuses
	// those types without one.
	Drafter engine.Drafter
	// DraftMax bounds a draft's tokens (--spec-draft-n-max); 0: 4.
	DraftMax int
	// DraftMin is the shortest draft worth its rows (--spec-draft-n-min);
	// shorter ones are dropped. 0: 1.
	DraftMin int
	// NgramMin is the shortest match the drafter drafts from, 1 to 3;
	// 0: 2. A single token recurs everywhere in prose: its drafts cost
	// rows (on a CPU a good part of a step each) and seldom land.
	NgramMin int
	// MinGain is the throughput a lane's drafted steps must reach, over a
	// plain step's, to keep drafting; 0: 1.08.
	MinGain float64
	// Ungated drafts whenever there is a draft, whatever it costs:
	// for benchmarks and tests of the verification itself.
	Ungated bool
	// SynthRates, when set (SynthRates resolves them), is synthetic
	// acceptance for benchmarks (spec_synth.go): DraftMax values, the
	// probability each draft position is committed whatever the model
	// says. Output is then not the model's.
	SynthRates []float64
}

// Defaults and bounds of Speculation.
const (
	DefaultDraftMax = 4
	maxDraftMax     = 64
	// specNgramMax is the longest n-gram the drafter looks up.
	specNgramMax = 3
)

// ParseSpecType reads a --spec-type value.
func ParseSpecType(s string) (SpecType, error) {
	switch t := SpecType(s); t {
	case "", SpecNone:
		return SpecNone, nil
	case SpecNgramSimple, SpecDraftSimple, SpecDraftMTP:
		return t, nil
	}
	return "", fmt.Errorf("sched: speculation type %q: want %s, %s, %s or %s", s, SpecNone, SpecNgramSimple, SpecDraftSimple, SpecDraftMTP)
}

func (s Speculation) on() bool {
	return s.Type == SpecNgramSimple || s.Type == SpecDraftSimple || s.Type == SpecDraftMTP
}

// drafted: the drafts come from a Drafter (a model), not the lane's own
// tokens.
func (s Speculation) drafted() bool { return s.Type == SpecDraftSimple || s.Type == SpecDraftMTP }

func (s Speculation) withDefaults() Speculation {
	if s.Type == "" {
		s.Type = SpecNone
	}
	if s.DraftMax == 0 {
		s.DraftMax = DefaultDraftMax
	}
	if s.DraftMin == 0 {
		s.DraftMin = 1
	}
	if s.MinGain == 0 {
		s.MinGain = defaultSpecMinGain
	}
	if s.NgramMin == 0 {
		s.NgramMin = 2
	}
	return s
}

// Check reports what is wrong with s, its zero fields taken as their
// defaults.
func (s Speculation) Check() error { return s.withDefaults().validate() }

func (s Speculation) validate() error {
	if _, err := ParseSpecType(string(s.Type)); err != nil {
		return err
	}
	switch {
	case s.DraftMax < 1 || s.DraftMax > maxDraftMax:
		return fmt.Errorf("sched: speculation draft max %d outside [1, %d]", s.DraftMax, maxDraftMax)
	case s.DraftMin < 1 || s.DraftMin > s.DraftMax:
		return fmt.Errorf("sched: speculation draft min %d outside [1, draft max %d]", s.DraftMin, s.DraftMax)
	case s.NgramMin < 1 || s.NgramMin > specNgramMax:
		return fmt.Errorf("sched: speculation n-gram min %d outside [1, %d]", s.NgramMin, specNgramMax)
	case !(s.MinGain >= 1) || s.MinGain > 100:
		return fmt.Errorf("sched: speculation min gain %v outside [1, 100]", s.MinGain)
	case len(s.SynthRates) > 0 && !s.on():
		return fmt.Errorf("sched: synthetic acceptance without a draft source")
	case s.Type == SpecDraftSimple && s.DraftModel == "" && s.Drafter == nil:
		return fmt.Errorf("sched: speculation type %s needs a draft model (--spec-draft-model)", SpecDraftSimple)
	case s.Type != SpecDraftSimple && s.DraftModel != "":
		return fmt.Errorf("sched: a draft model (--spec-draft-model) drafts only with --spec-type %s", SpecDraftSimple)
	case !s.drafted() && s.Drafter != nil:
		return fmt.Errorf("sched: a drafter drafts only with --spec-type %s or %s", SpecDraftSimple, SpecDraftMTP)
	case !(s.DraftPMin >= 0 && s.DraftPMin <= 1):
		return fmt.Errorf("sched: speculation draft minimum probability %v outside [0, 1]", s.DraftPMin)
	}
	if len(s.SynthRates) > 0 {
		if _, err := SynthRates(s.SynthRates, 0, s.DraftMax); err != nil {
			return err
		}
	}
	return nil
}

// specState is the planner's part of speculation.
type specState struct {
	cfg Speculation
	// enabled: the config drafts and the engine can cut sequences back.
	enabled  bool
	baseline specBaseline
	// gate is what the lanes' gates learnt, a new lane's start.
	gate modelGate
	// room is the draft rows the step being planned has left; lanes is
	// its decoding lanes and drafted whether any carries a draft.
	room    int
	lanes   int
	drafted bool
	buf     []engine.Token
	synth   synthState
	model   modelDrafts
}

func newSpecState(cfg Speculation, d *engine.Descriptor, lanes int) specState {
	if d.DraftMax > 0 && cfg.DraftMax > d.DraftMax {
		// Recurrent state rolls back at most the snapshots it keeps.
		cfg.DraftMax = min(cfg.DraftMax, d.DraftMax)
	}
	return specState{
		cfg:      cfg,
		enabled:  cfg.on() && d.Drafts,
		baseline: newSpecBaseline(lanes),
		buf:      make([]engine.Token, 0, cfg.DraftMax),
		synth:    newSynthState(cfg.SynthRates),
	}
}

// beginDecodes readies the step's draft rows: none in a step that
// prefills or measures the plain step time, else what the batch has left
// beside the decoding lanes' own rows.
func (p *planner) beginDecodes(pl *engine.Plan, decoders int) {
	s := &p.spec
	s.room, s.lanes, s.drafted = 0, decoders, false
	if !s.enabled || decoders == 0 || len(pl.Prefills) > 0 {
		return
	}
	if !s.cfg.Ungated && !s.synth.on() && s.baseline.due(decoders) {
		return
	}
	s.room = max(0, p.batch-decoders) // a decode-only step: nothing else takes rows
}

// addDecode adds l's token to the step, with a draft when its gate is open,
// the step has room and the source has one: the n-gram draft now, the
// draft model's once finishDrafts has asked it for every lane. Lanes come
// in the order decoders sorts them, so better classes take the room first.
func (p *planner) addDecode(pl *engine.Plan, l *lane) {
	s := &p.spec
	l.draftOff, l.draftLen, l.stepTokens, l.stepAccepted = 0, 0, 0, 0
	k := min(s.cfg.DraftMax, s.room)
	if !s.cfg.Ungated && !s.synth.on() {
		// Never below DraftMin: a lane sized below it would never draft,
		// nor measure, again.
		k = min(k, max(l.gate.draftLen(s.cfg.DraftMax), s.cfg.DraftMin))
	}
	if left := l.toGenerate(); left >= 0 {
		k = min(k, left-1) // the token after the draft is the model's own
	}
	// The draft's rows follow the fed token's, inside the context.
	k = min(k, p.ctx-l.npast-2)
	synth := s.synth.on() && l.job.grammar == 0
	pl.Decodes = append(pl.Decodes, engine.Decode{Lane: l.tag})
	if k < s.cfg.DraftMin || !(s.cfg.Ungated || synth || l.gate.drafts()) {
		return
	}
	if s.cfg.drafted() {
		s.room -= k // held until the drafter answers (finishDrafts)
		s.model.ask(l, len(pl.Decodes)-1, k, synth)
		return
	}
	s.buf = ngramDraft(s.buf[:0], l.tokens, specNgramMax, s.cfg.NgramMin, k)
	p.addDraft(pl, len(pl.Decodes)-1, l, k, synth)
}

// addDraft gives l's decode, the plan's decode at index i, the draft in
// s.buf (padded to k for synthetic acceptance), or leaves it plain when the
// draft is shorter than DraftMin.
func (p *planner) addDraft(pl *engine.Plan, i int, l *lane, k int, synth bool) {
	s := &p.spec
	if synth {
		s.buf = synthDraft(s.buf, l.tokens, k)
	}
	if len(s.buf) < s.cfg.DraftMin {
		return
	}
	d := &pl.Decodes[i]
	l.draftOff, l.draftLen = len(pl.Tokens), len(s.buf)
	d.DraftOff, d.DraftLen = uint32(len(pl.Tokens)), uint32(len(s.buf))
	pl.Tokens = append(pl.Tokens, s.buf...)
	if synth {
		d.SynthAccept = uint32(s.synth.accepts(len(s.buf)))
	}
	s.room -= len(s.buf)
	s.drafted = true
}

// onDraftToken counts a token the step sampled for l against its draft:
// the leading tokens equal to the draft are the accepted ones.
func (p *planner) onDraftToken(l *lane, t engine.Token) {
	i := l.stepTokens
	l.stepTokens++
	if i == l.stepAccepted && i < l.draftLen && p.plan.Tokens[l.draftOff+i] == t {
		l.stepAccepted++
	}
}

// learnSpec takes in a step's drafts: counters, the lanes' gates and the
// plain step time.
// ran is false for a step that sampled nothing (a full KV cache).
func (p *planner) learnSpec(t *engine.Timings, secs float64, ran bool) {
	s := &p.spec
	if !s.enabled || !ran || secs <= 0 {
		return
	}
	pl := &p.plan
	decodeOnly := t.PrefillTokens == 0 && len(pl.Prefills) == 0
	s.gate.step()
	for i := range pl.Decodes {
		l := p.find(pl.Decodes[i].Lane)
		if l == nil {
			continue
		}
		if l.draftLen == 0 {
			l.gate.observePlain()
			continue
		}
		p.stats.draftTokens.Add(uint64(l.draftLen))
		p.stats.draftAccepted.Add(uint64(l.stepAccepted))
		l.job.draftTokens += l.draftLen
		l.job.draftAccepted += l.stepAccepted
		// The drafter's time is the drafted step's too.
		if decodeOnly && !s.cfg.Ungated && !s.synth.on() {
			closed := l.gate.observeDrafted(l.stepTokens, secs+s.draftSecs(), s.baseline.plainSecs(s.lanes), s.cfg.MinGain)
			if closed {
				p.stats.draftGateClosed.Add(1)
			}
			if closed || l.gate.paid() {
				s.gate.learn(l.gate)
			}
		}
		l.draftLen, l.stepTokens, l.stepAccepted = 0, 0, 0
	}
	if decodeOnly {
		s.baseline.observe(s.lanes, s.drafted, secs)
	}
}

// stepSecs is a step's time: the engine's, or the Tick call's when it
// reports none.
func stepSecs(t *engine.Timings, stepTime time.Duration) float64 {
	if t.StepNS > 0 {
		return float64(t.StepNS) / 1e9
	}
	return stepTime.Seconds()
}
