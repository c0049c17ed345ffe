package sched

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"superfluid/engine"
)

// fakeEngine implements engine.Engine without a model. It validates plans
// as the real engine does (a malformed plan changes nothing and returns an
// *engine.Error), runs them as steps of mixed batches, and samples tokens
// that are a pure function of everything before them in the sequence, like
// greedy decoding of a real model: a request's output is the same whether
// it ran straight through or was preempted and resumed from its prompt
// plus what it had generated. Each step advances a virtual clock by a cost
// model, so timings and the rates the scheduler learns are realistic.
type fakeEngine struct {
	desc  engine.Descriptor
	cost  costModel
	clock interface{ Advance(time.Duration) }

	yield    atomic.Int32
	seqs     [][]engine.Token
	seqOwner []uint32 // lane tag holding each sequence; 0: none
	lanes    map[uint32]*fakeLane
	kvCap    int    // tokens all sequences may hold together; 0: no limit
	eogEvery uint64 // about one sampled token in eogEvery ends generation; 0: never

	ev       engine.Events
	touched  []*fakeLane
	decoding []*fakeLane

	// onStep runs after each step (the step's index), before the yield
	// word is read: a test cancels or submits "mid-tick" from it.
	onStep func(step int)
	// trace, when set, records each tick; traceNow stamps it.
	trace    *strings.Builder
	traceNow func() time.Duration
	ticks    int
	plans    []engine.Plan // copies of every plan, when keepPlans
	keep     bool
	// lastYieldSteps is the steps of the last tick that yielded.
	lastYieldSteps int
}

// costModel is virtual time per step.
type costModel struct {
	step         time.Duration // fixed per step
	prefillToken time.Duration
	decodeRow    time.Duration // per decoding lane in a step
}

// cpuCost is roughly the design notes' CPU machine: 112 prompt tokens/s,
// one stream at 25 tokens/s.
var cpuCost = costModel{step: 30 * time.Millisecond, prefillToken: 8 * time.Millisecond, decodeRow: 10 * time.Millisecond}

type fakeLane struct {
	tag        uint32
	seq        int32
	prompt     []engine.Token
	prefilled  int
	generated  int
	max        int
	logprobs   int
	pending    engine.Token
	hasPending bool
	finish     engine.Finish
	rounds     int
	emitted    int
	hash       uint64
	touchedAt  int
}

const (
	fakeVocab = 1000
	fakeEOS   = 2
)

func newFakeEngine(lanes, batch, seqs, ctx int, clock interface{ Advance(time.Duration) }) *fakeEngine {
	e := &fakeEngine{
		desc: engine.Descriptor{
			Architecture: "fake", Vocab: fakeVocab, Ctx: ctx, Seqs: seqs, Lanes: lanes, Batch: batch,
			BOS: 1, EOS: fakeEOS, EOT: fakeEOS, EOG: []engine.Token{fakeEOS},
			FIM: engine.FIM{Prefix: -1, Suffix: -1, Middle: -1, Pad: -1, RepoName: -1, FileSep: -1},
		},
		cost:     cpuCost,
		clock:    clock,
		seqs:     make([][]engine.Token, seqs),
		seqOwner: make([]uint32, seqs),
		lanes:    map[uint32]*fakeLane{},
	}
	return e
}

func (e *fakeEngine) Descriptor() *engine.Descriptor { return &e.desc }
func (e *fakeEngine) Yield()                         { e.yield.Store(1) }
func (e *fakeEngine) ClearYield()                    { e.yield.Store(0) }

func (e *fakeEngine) CopyPrefix(src, dst int32, n int) error {
	if !e.seqOK(src) || !e.seqOK(dst) || n > len(e.seqs[src]) {
		return &engine.Error{Status: engine.StatusSeqRange, Op: "copy prefix"}
	}
	e.seqs[dst] = append(e.seqs[dst][:0], e.seqs[src][:n]...)
	return nil
}

func (e *fakeEngine) Truncate(seq int32, keep int) error {
	if !e.seqOK(seq) {
		return &engine.Error{Status: engine.StatusSeqRange, Op: "truncate"}
	}
	e.seqs[seq] = e.seqs[seq][:min(keep, len(e.seqs[seq]))]
	return nil
}

func (e *fakeEngine) Free(seq int32) error { return e.Truncate(seq, 0) }

func (e *fakeEngine) SeqLen(seq int32) int {
	if !e.seqOK(seq) {
		return 0
	}
	return len(e.seqs[seq])
}

func (e *fakeEngine) Export(int32, []byte) ([]byte, error) {
	return nil, &engine.Error{Status: engine.StatusUnsupported, Op: "export"}
}

func (e *fakeEngine) Import(int32, []byte) (int, error) {
	return 0, &engine.Error{Status: engine.StatusUnsupported, Op: "import"}
}

func (e *fakeEngine) seqOK(s int32) bool { return s >= 0 && int(s) < len(e.seqs) }

func (e *fakeEngine) kvUsed() int {
	n := 0
	for _, s := range e.seqs {
		n += len(s)
	}
	return n
}

func fail(st engine.Status, format string, args ...any) error {
	return &engine.Error{Status: st, Op: "tick", Msg: fmt.Sprintf(format, args...)}
}

// Tick validates the whole plan first, then applies it.
func (e *fakeEngine) Tick(p *engine.Plan) (*engine.Events, error) {
	ev := &e.ev
	ev.Tokens, ev.Top, ev.Lanes = ev.Tokens[:0], ev.Top[:0], ev.Lanes[:0]
	ev.Timings = engine.Timings{}
	if err := e.validate(p); err != nil {
		return ev, err
	}
	e.ticks++
	if e.keep {
		e.plans = append(e.plans, clonePlan(p))
	}
	if e.trace != nil {
		e.tracePlan(p)
	}
	e.touched = e.touched[:0]
	for _, tag := range p.Retires {
		l := e.lanes[tag]
		e.seqOwner[l.seq] = 0
		delete(e.lanes, tag)
	}
	for i := range p.Admits {
		a := &p.Admits[i]
		l := &fakeLane{
			tag: a.Lane, seq: a.Seq, prompt: slices.Clone(p.Tokens[a.PromptOff : a.PromptOff+a.PromptLen]),
			prefilled: int(a.Cached), max: int(a.MaxTokens), logprobs: int(a.Logprobs),
		}
		l.hash = hashTokens(fnvOffset, l.prompt[:l.prefilled])
		e.lanes[a.Lane] = l
		e.seqOwner[a.Seq] = a.Lane
		e.touch(l)
	}
	for i := range p.Decodes {
		l := e.lanes[p.Decodes[i].Lane]
		e.touch(l)
		l.rounds = int(p.Decodes[i].Rounds)
	}
	var err error
	for step := 0; ; step++ {
		ran, serr := e.step(p, step == 0)
		if serr != nil {
			err = serr
			break
		}
		if !ran {
			break
		}
		if e.onStep != nil {
			e.onStep(step)
		}
		if e.yield.Load() != 0 {
			ev.Timings.Yielded = 1
			e.lastYieldSteps = int(ev.Timings.Steps)
			break
		}
	}
	for _, l := range e.touched {
		ev.Lanes = append(ev.Lanes, engine.LaneEvent{
			Lane: l.tag, Finish: l.finish, Prefilled: uint32(l.prefilled),
			NPast: uint32(len(e.seqs[l.seq])), Generated: uint32(l.generated),
		})
	}
	if e.trace != nil {
		e.traceEvents(ev, err)
	}
	return ev, err
}

func (e *fakeEngine) touch(l *fakeLane) {
	if l.touchedAt != e.ticks {
		l.touchedAt = e.ticks
		l.emitted = 0
		l.rounds = 0
		e.touched = append(e.touched, l)
	}
}

// step runs one step: every prefill chunk (first step only) beside one
// token per decoding lane. It reports false when there was nothing to run.
func (e *fakeEngine) step(p *engine.Plan, first bool) (bool, error) {
	prefill, rows := 0, 0
	if first {
		for i := range p.Prefills {
			prefill += int(p.Prefills[i].Count)
		}
	}
	for i := range p.Decodes {
		l := e.lanes[p.Decodes[i].Lane]
		if l.hasPending && l.finish == engine.FinishNone && l.emitted < l.rounds {
			rows++
		}
	}
	if prefill+rows == 0 {
		return false, nil
	}
	if e.kvCap > 0 && e.kvUsed()+prefill+rows > e.kvCap {
		return false, fail(engine.StatusKVFull, "the KV cache has no room for a step of %d tokens", prefill+rows)
	}
	// Lanes decoding at the start of the step, before prefills complete.
	decoding := e.decoding[:0]
	defer func() { e.decoding = decoding[:0] }()
	for i := range p.Decodes {
		l := e.lanes[p.Decodes[i].Lane]
		if l.hasPending && l.finish == engine.FinishNone && l.emitted < l.rounds {
			decoding = append(decoding, l)
		}
	}
	if first {
		for i := range p.Prefills {
			f := &p.Prefills[i]
			l := e.lanes[f.Lane]
			e.touch(l)
			chunk := l.prompt[f.Offset : f.Offset+f.Count]
			e.seqs[l.seq] = append(e.seqs[l.seq], chunk...)
			l.hash = hashTokens(l.hash, chunk)
			l.prefilled += int(f.Count)
			e.ev.Timings.PrefillTokens += f.Count
			if l.prefilled == len(l.prompt) {
				e.sample(l)
			}
		}
	}
	for _, l := range decoding {
		e.seqs[l.seq] = append(e.seqs[l.seq], l.pending)
		l.hasPending = false
		e.ev.Timings.DecodeTokens++
		e.sample(l)
	}
	cost := e.cost.step + time.Duration(prefill)*e.cost.prefillToken + time.Duration(rows)*e.cost.decodeRow
	if prefill > 0 {
		e.ev.Timings.PrefillNS += int64(cost)
	} else {
		e.ev.Timings.DecodeNS += int64(cost)
	}
	e.ev.Timings.Steps++
	if e.clock != nil {
		e.clock.Advance(cost)
	}
	return true, nil
}

// sample draws the lane's next token from the hash of its history.
func (e *fakeEngine) sample(l *fakeLane) {
	t, eog := nextToken(l.hash, e.eogEvery)
	l.hash = hashTokens(l.hash, []engine.Token{t})
	l.generated++
	l.emitted++
	te := engine.TokenEvent{Lane: l.tag, Token: t}
	if l.logprobs > 0 {
		te.Logprob = -float32(t%7) / 10
		te.TopOff = uint32(len(e.ev.Top))
		for k := range l.logprobs {
			e.ev.Top = append(e.ev.Top, engine.TopLogprob{Token: (t + engine.Token(k)) % fakeVocab, Logprob: -float32(k) / 4})
		}
		te.TopLen = uint32(l.logprobs)
	}
	switch {
	case eog:
		l.finish = engine.FinishEOG
	case l.max > 0 && l.generated >= l.max:
		l.finish = engine.FinishLength
	case len(e.seqs[l.seq]) >= e.desc.Ctx:
		l.finish = engine.FinishContext
	default:
		l.pending, l.hasPending = t, true
	}
	te.Finish = l.finish
	e.ev.Tokens = append(e.ev.Tokens, te)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashTokens(h uint64, ts []engine.Token) uint64 {
	for _, t := range ts {
		h ^= uint64(uint32(t))
		h *= fnvPrime
	}
	return h
}

// nextToken is the fake model: the token after a history whose hash is h.
func nextToken(h uint64, eogEvery uint64) (engine.Token, bool) {
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	if eogEvery > 0 && (h>>8)%eogEvery == 0 {
		return fakeEOS, true
	}
	return engine.Token(3 + h%(fakeVocab-3)), false
}

// reference is what the fake model generates for prompt, run straight
// through with nothing else around: the output every schedule must match.
func reference(prompt []engine.Token, maxTokens int, eogEvery uint64, stop []engine.Token, ctx int) []engine.Token {
	h := hashTokens(fnvOffset, prompt)
	var out []engine.Token
	n := len(prompt)
	for {
		t, eog := nextToken(h, eogEvery)
		h = hashTokens(h, []engine.Token{t})
		out = append(out, t)
		if eog || (maxTokens > 0 && len(out) >= maxTokens) {
			return out
		}
		for _, s := range stop {
			if s == t {
				return out
			}
		}
		if n+len(out)-1 >= ctx {
			return out
		}
	}
}

func (e *fakeEngine) validate(p *engine.Plan) error {
	retired := func(tag uint32) bool {
		for _, r := range p.Retires {
			if r == tag {
				return true
			}
		}
		return false
	}
	admitted := func(tag uint32) *engine.Admit {
		for i := range p.Admits {
			if p.Admits[i].Lane == tag {
				return &p.Admits[i]
			}
		}
		return nil
	}
	for i, tag := range p.Retires {
		if e.lanes[tag] == nil {
			return fail(engine.StatusUnknownLane, "retire: unknown lane %d", tag)
		}
		for _, r := range p.Retires[:i] {
			if r == tag {
				return fail(engine.StatusInvalid, "retire: lane %d twice", tag)
			}
		}
	}
	if live := len(e.lanes) - len(p.Retires); live+len(p.Admits) > e.desc.Lanes {
		return fail(engine.StatusInvalid, "admit: %d lanes would exceed %d", live+len(p.Admits), e.desc.Lanes)
	}
	for i := range p.Admits {
		a := &p.Admits[i]
		if e.lanes[a.Lane] != nil && !retired(a.Lane) {
			return fail(engine.StatusLaneExists, "admit: lane %d is already admitted", a.Lane)
		}
		for _, b := range p.Admits[:i] {
			if b.Lane == a.Lane {
				return fail(engine.StatusLaneExists, "admit: lane %d twice", a.Lane)
			}
			if b.Seq == a.Seq {
				return fail(engine.StatusSeqBusy, "admit: sequence %d twice", a.Seq)
			}
		}
		if !e.seqOK(a.Seq) {
			return fail(engine.StatusSeqRange, "admit lane %d: sequence %d out of range", a.Lane, a.Seq)
		}
		if o := e.seqOwner[a.Seq]; o != 0 && !retired(o) {
			return fail(engine.StatusSeqBusy, "admit lane %d: sequence %d carries lane %d", a.Lane, a.Seq, o)
		}
		if a.PromptLen == 0 || int(a.PromptOff+a.PromptLen) > len(p.Tokens) {
			return fail(engine.StatusInvalid, "admit lane %d: bad prompt", a.Lane)
		}
		if int(a.PromptLen) > e.desc.Ctx {
			return fail(engine.StatusContext, "admit lane %d: prompt exceeds the context", a.Lane)
		}
		if a.Cached >= a.PromptLen {
			return fail(engine.StatusInvalid, "admit lane %d: nothing left to prefill", a.Lane)
		}
		prompt := p.Tokens[a.PromptOff : a.PromptOff+a.PromptLen]
		held := e.seqs[a.Seq]
		if len(held) != int(a.Cached) {
			return fail(engine.StatusInvalid, "admit lane %d: sequence %d holds %d tokens, the plan says %d", a.Lane, a.Seq, len(held), a.Cached)
		}
		for k, t := range held {
			if t != prompt[k] {
				return fail(engine.StatusInvalid, "admit lane %d: sequence %d differs from the prompt at %d", a.Lane, a.Seq, k)
			}
		}
		for _, t := range prompt {
			if t < 0 || t >= fakeVocab {
				return fail(engine.StatusInvalid, "admit lane %d: token %d outside the vocabulary", a.Lane, t)
			}
		}
		if int(a.BiasOff+a.BiasLen) > len(p.Biases) || a.Logprobs < 0 || a.Logprobs > engine.MaxLogprobs {
			return fail(engine.StatusInvalid, "admit lane %d: bad bias or logprobs", a.Lane)
		}
		if err := validSampling(&a.Sampling); err != nil {
			return fail(engine.StatusInvalid, "admit lane %d: %v", a.Lane, err)
		}
	}
	step0 := 0
	for i := range p.Prefills {
		f := &p.Prefills[i]
		a := admitted(f.Lane)
		l := e.lanes[f.Lane]
		if a == nil && (l == nil || retired(f.Lane)) {
			return fail(engine.StatusUnknownLane, "prefill: unknown lane %d", f.Lane)
		}
		plen, done := 0, 0
		if a != nil {
			plen, done = int(a.PromptLen), int(a.Cached)
		} else {
			plen, done = len(l.prompt), l.prefilled
		}
		if f.Count == 0 || int(f.Offset+f.Count) > plen {
			return fail(engine.StatusPastPrompt, "prefill lane %d: [%d, +%d) outside its %d-token prompt", f.Lane, f.Offset, f.Count, plen)
		}
		if int(f.Offset) != done {
			return fail(engine.StatusInvalid, "prefill lane %d: starts at %d, its prompt continues at %d", f.Lane, f.Offset, done)
		}
		for _, g := range p.Prefills[:i] {
			if g.Lane == f.Lane {
				return fail(engine.StatusInvalid, "prefill: lane %d twice", f.Lane)
			}
		}
		step0 += int(f.Count)
	}
	for i := range p.Decodes {
		d := &p.Decodes[i]
		a := admitted(d.Lane)
		l := e.lanes[d.Lane]
		if a == nil && (l == nil || retired(d.Lane)) {
			return fail(engine.StatusUnknownLane, "decode: unknown lane %d", d.Lane)
		}
		if d.Rounds == 0 {
			return fail(engine.StatusInvalid, "decode lane %d: zero rounds", d.Lane)
		}
		if a == nil && l.finish != engine.FinishNone {
			return fail(engine.StatusInvalid, "decode lane %d: the lane has finished", d.Lane)
		}
		for _, g := range p.Decodes[:i] {
			if g.Lane == d.Lane {
				return fail(engine.StatusInvalid, "decode: lane %d twice", d.Lane)
			}
		}
		prefilling := false
		for _, f := range p.Prefills {
			prefilling = prefilling || f.Lane == d.Lane
		}
		if a != nil && !prefilling {
			return fail(engine.StatusInvalid, "decode lane %d: admitted without a prefill", d.Lane)
		}
		if a == nil && !l.hasPending && !prefilling {
			return fail(engine.StatusInvalid, "decode lane %d: its prompt is not prefilled", d.Lane)
		}
		if a == nil && l.hasPending {
			step0++
		}
	}
	if step0 > e.desc.Batch {
		return fail(engine.StatusBatch, "step of %d tokens exceeds the batch of %d", step0, e.desc.Batch)
	}
	return nil
}

func clonePlan(p *engine.Plan) engine.Plan {
	return engine.Plan{
		Retires:  append([]uint32(nil), p.Retires...),
		Admits:   append([]engine.Admit(nil), p.Admits...),
		Prefills: append([]engine.Prefill(nil), p.Prefills...),
		Decodes:  append([]engine.Decode(nil), p.Decodes...),
	}
}

func (e *fakeEngine) tracePlan(p *engine.Plan) {
	w := e.trace
	if e.traceNow != nil {
		fmt.Fprintf(w, "tick %d @%v\n", e.ticks, e.traceNow())
	} else {
		fmt.Fprintf(w, "tick %d\n", e.ticks)
	}
	for _, r := range p.Retires {
		fmt.Fprintf(w, "  retire L%d\n", r)
	}
	for _, a := range p.Admits {
		fmt.Fprintf(w, "  admit L%d seq=%d prompt=%d cached=%d max=%d\n", a.Lane, a.Seq, a.PromptLen, a.Cached, a.MaxTokens)
	}
	for _, f := range p.Prefills {
		fmt.Fprintf(w, "  prefill L%d [%d,+%d)\n", f.Lane, f.Offset, f.Count)
	}
	for _, d := range p.Decodes {
		fmt.Fprintf(w, "  decode L%d rounds=%d\n", d.Lane, d.Rounds)
	}
}

func (e *fakeEngine) traceEvents(ev *engine.Events, err error) {
	w := e.trace
	counts := map[uint32]int{}
	var order []uint32
	var fin []string
	for _, t := range ev.Tokens {
		if counts[t.Lane] == 0 {
			order = append(order, t.Lane)
		}
		counts[t.Lane]++
		if t.Finish != engine.FinishNone {
			fin = append(fin, fmt.Sprintf("L%d:%s", t.Lane, t.Finish))
		}
	}
	var parts []string
	for _, l := range order {
		parts = append(parts, fmt.Sprintf("L%d×%d", l, counts[l]))
	}
	fmt.Fprintf(w, "  => steps=%d tokens[%s]", ev.Timings.Steps, strings.Join(parts, " "))
	if len(fin) > 0 {
		fmt.Fprintf(w, " finished[%s]", strings.Join(fin, " "))
	}
	if ev.Timings.Yielded != 0 {
		fmt.Fprintf(w, " yielded")
	}
	if err != nil {
		fmt.Fprintf(w, " err=%q", err)
	}
	fmt.Fprintln(w)
}

// lastTickYieldedAt reports whether the last tick that ran steps stopped on
// the yield word after n steps.
func (e *fakeEngine) lastTickYieldedAt(n int) bool { return e.lastYieldSteps == n }
