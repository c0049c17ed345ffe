// Package enginetest is a fake engine.Engine for tests of what drives an
// engine (the scheduler, the cache): no model, virtual time, and the real
// engine's plan validation, refusal for refusal.
package enginetest

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sync"
	"time"

	"superfluid/engine"
)

// Fake implements engine.Engine without a model. It refuses exactly the
// plans native/tick.cpp's validate refuses, with the same status and the
// same blamed lane (see validate.go), runs the rest as one mixed batch
// each, and samples tokens that are a pure function of everything
// before them in the sequence, like greedy decoding of a real model: a
// request's output is the same whether it ran straight through or was
// preempted and resumed from its prompt plus what it had generated. Each
// step advances a virtual clock by a cost model, so timings and the rates
// a scheduler learns are realistic.
type Fake struct {
	desc  engine.Descriptor
	clock Advancer

	// Cost is the virtual time each step takes.
	Cost CostModel
	// KVCap is the tokens all sequences may hold together; 0: no limit. A
	// step that would pass it fails with engine.ErrKVFull, as
	// llama_decode's does.
	KVCap int
	// EOGEvery: about one sampled token in EOGEvery ends generation; 0:
	// never.
	EOGEvery uint64
	// Period, when set, makes the fake model repeat its sequence: the
	// token it samples is the one Period tokens back (once the sequence
	// holds that many), never an end of generation — a model whose
	// output n-gram drafts predict.
	Period int
	// OnStep runs after each step that ran (the engine's tick count), before
	// Tick returns: a test cancels or submits from it as if between steps.
	OnStep func(tick int)
	// Trace, when set, receives each step's plan and what it produced;
	// TraceNow stamps it.
	Trace    io.Writer
	TraceNow func() time.Duration
	// KeepPlans keeps a copy of every plan that ran in Plans.
	KeepPlans bool
	Plans     []engine.Plan
	// Refusals is every plan Tick refused (its error), in order; a tick
	// that ran and stopped on a full KV cache is not one.
	Refusals []error

	seqs [][]engine.Token
	// seqSalt is the LoRA salt a sequence's cells were computed under
	// (LoRASalt; 0: no adapter); mixedSalt poisons the hash of a sequence
	// whose cells were computed under more than one set.
	seqSalt  []uint64
	salt     uint64  // the step being run's (LoRASalt of its plan)
	seqOwner []int64 // lane tag holding each sequence; -1: none
	lanes    map[uint32]*lane

	ev       engine.Events
	touched  []*lane
	decoding []*lane
	ticks    int

	// grammars: the fake compiles a grammar by checking it as the native
	// engine does first (engine.CheckGrammar) and otherwise treats it as
	// opaque; its tokens are not constrained.
	grammars    *engine.GrammarCache
	nextGrammar engine.GrammarID
	grammarMu   sync.Mutex
}

// Advancer is the virtual clock the fake engine moves.
type Advancer interface{ Advance(time.Duration) }

// CostModel is virtual time per step.
type CostModel struct {
	Step         time.Duration // fixed per step
	PrefillToken time.Duration
	DecodeRow    time.Duration // per decoding lane in a step
	// PerPosition is what each row (prompt token or decoding lane) costs
	// for every token before it in its sequence: attention over the KV
	// cache, which makes a token deep in a long prompt dearer than one at
	// its start. 0: rows cost the same at any depth.
	PerPosition time.Duration
}

// CPUCost is roughly the design notes' CPU machine: 112 prompt tokens/s,
// one stream at 25 tokens/s.
var CPUCost = CostModel{Step: 30 * time.Millisecond, PrefillToken: 8 * time.Millisecond, DecodeRow: 10 * time.Millisecond}

type lane struct {
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
	hash       uint64
	touchedAt  int
	grammar    bool
}

// The fake model's vocabulary and end-of-generation token.
const (
	Vocab = 1000
	EOS   = 2
)

// New makes a fake engine running up to lanes lanes over seqs sequences,
// batch tokens a step and ctx tokens a sequence. clock may be nil.
func New(lanes, batch, seqs, ctx int, clock Advancer) *Fake {
	e := &Fake{
		desc: engine.Descriptor{
			Architecture: "fake", Vocab: Vocab, Ctx: ctx, Seqs: seqs, Lanes: lanes, Batch: batch, UBatch: min(batch, 512),
			BOS: 1, EOS: EOS, EOT: EOS, EOG: []engine.Token{EOS},
			FIM: engine.FIM{Prefix: -1, Suffix: -1, Middle: -1, Pad: -1, RepoName: -1, FileSep: -1},
		},
		Cost:     CPUCost,
		clock:    clock,
		seqs:     make([][]engine.Token, seqs),
		seqSalt:  make([]uint64, seqs),
		seqOwner: make([]int64, seqs),
		lanes:    map[uint32]*lane{},
	}
	for i := range e.seqOwner {
		e.seqOwner[i] = -1
	}
	e.grammars = engine.NewGrammarCache(e.compileGrammar, func(engine.GrammarID) {}, 0)
	return e
}

var _ engine.Grammars = (*Fake)(nil)

// AcquireGrammar implements engine.Grammars.
func (e *Fake) AcquireGrammar(g *engine.GrammarSpec) (engine.GrammarID, error) {
	return e.grammars.AcquireGrammar(g)
}

// ReleaseGrammar implements engine.Grammars.
func (e *Fake) ReleaseGrammar(id engine.GrammarID) { e.grammars.ReleaseGrammar(id) }

// GrammarCache is the fake's grammar cache, for tests that check
// references are released.
func (e *Fake) GrammarCache() *engine.GrammarCache { return e.grammars }

func (e *Fake) compileGrammar(g *engine.GrammarSpec) (engine.GrammarID, error) {
	if err := engine.CheckGrammar(g); err != nil {
		return 0, err
	}
	for _, t := range g.TriggerTokens {
		if t < 0 || int(t) >= e.desc.Vocab {
			return 0, &engine.Error{Status: engine.StatusGrammar, Op: "grammar", Msg: "trigger token outside the vocabulary"}
		}
	}
	e.grammarMu.Lock()
	defer e.grammarMu.Unlock()
	e.nextGrammar++
	return e.nextGrammar, nil
}

func (e *Fake) Descriptor() *engine.Descriptor { return &e.desc }

func (e *Fake) CopyPrefix(src, dst int32, n int) error {
	if !e.seqOK(src) || !e.seqOK(dst) || n > len(e.seqs[src]) {
		return &engine.Error{Status: engine.StatusSeqRange, Op: "copy prefix"}
	}
	e.seqs[dst] = append(e.seqs[dst][:0], e.seqs[src][:n]...)
	e.seqSalt[dst] = e.seqSalt[src]
	return nil
}

func (e *Fake) Truncate(seq int32, keep int) error {
	if !e.seqOK(seq) {
		return &engine.Error{Status: engine.StatusSeqRange, Op: "truncate"}
	}
	e.seqs[seq] = e.seqs[seq][:min(keep, len(e.seqs[seq]))]
	return nil
}

func (e *Fake) Free(seq int32) error { return e.Truncate(seq, 0) }

func (e *Fake) SeqLen(seq int32) int {
	if !e.seqOK(seq) {
		return 0
	}
	return len(e.seqs[seq])
}

func (e *Fake) Export(int32, []byte) ([]byte, error) {
	return nil, &engine.Error{Status: engine.StatusUnsupported, Op: "export"}
}

func (e *Fake) Import(int32, []byte) (int, error) {
	return 0, &engine.Error{Status: engine.StatusUnsupported, Op: "import"}
}

// Seq is the tokens seq holds (the fake's KV cache); nil out of range. The
// caller must not modify it.
func (e *Fake) Seq(seq int32) []engine.Token {
	if !e.seqOK(seq) {
		return nil
	}
	return e.seqs[seq]
}

// ReserveSeq grows seq's storage by n tokens, so that a test measuring
// allocations does not count the fake's.
func (e *Fake) ReserveSeq(seq int32, n int) {
	if e.seqOK(seq) {
		e.seqs[seq] = slices.Grow(e.seqs[seq], n)
	}
}

// SeqOwner is the lane holding seq, if any.
func (e *Fake) SeqOwner(seq int32) (uint32, bool) {
	if !e.seqOK(seq) || e.seqOwner[seq] < 0 {
		return 0, false
	}
	return uint32(e.seqOwner[seq]), true
}

// Lanes is how many lanes the engine holds.
func (e *Fake) Lanes() int { return len(e.lanes) }

// HasLane reports whether the engine holds lane tag.
func (e *Fake) HasLane(tag uint32) bool { return e.lanes[tag] != nil }

// SetVocab gives the fake model a vocabulary of n tokens (at least 4)
// instead of Vocab, to mirror another engine's descriptor. Reference
// holds for the default vocabulary only.
func (e *Fake) SetVocab(n int) {
	e.desc.Vocab = max(n, 4)
}

// SetLoRA makes the fake hold n LoRA adapters: plans may carry n scales,
// and a step's scales change what every row of it computes (LoRASalt).
func (e *Fake) SetLoRA(n int) { e.desc.LoRA = n }

func (e *Fake) seqOK(s int32) bool { return s >= 0 && int(s) < len(e.seqs) }

func (e *Fake) kvUsed() int {
	n := 0
	for _, s := range e.seqs {
		n += len(s)
	}
	return n
}

// Tick validates the whole plan first, then applies it.
func (e *Fake) Tick(p *engine.Plan) (*engine.Events, error) {
	ev := &e.ev
	ev.Tokens, ev.Top, ev.Lanes = ev.Tokens[:0], ev.Top[:0], ev.Lanes[:0]
	ev.Timings = engine.Timings{}
	if err := e.validate(p); err != nil {
		e.Refusals = append(e.Refusals, err)
		if e.Trace != nil {
			e.tracePlan(p)
			fmt.Fprintf(e.Trace, "  => refused: %v\n", err)
		}
		return ev, err
	}
	e.ticks++
	if e.KeepPlans {
		e.Plans = append(e.Plans, ClonePlan(p))
	}
	if e.Trace != nil {
		e.tracePlan(p)
	}
	e.touched = e.touched[:0]
	for _, tag := range p.Retires {
		l := e.lanes[tag]
		e.seqOwner[l.seq] = -1
		delete(e.lanes, tag)
	}
	for i := range p.Admits {
		a := &p.Admits[i]
		l := &lane{
			tag: a.Lane, seq: a.Seq, prompt: slices.Clone(p.Tokens[a.PromptOff : a.PromptOff+a.PromptLen]),
			prefilled: int(a.Cached), max: int(a.MaxTokens), logprobs: int(a.Logprobs),
			grammar: a.Grammar != 0,
		}
		// The cached cells hold what they were computed under: a prefix
		// computed under another adapter set gives another history.
		// Hashed from the cells, not the prompt: a media span's cells hold
		// its rows' tokens (PrefillRows), the prompt placeholders.
		held := e.seqs[a.Seq]
		l.hash = hashTokensUnder(fnvOffset, held[:min(len(held), l.prefilled)], e.seqSalt[a.Seq])
		e.lanes[a.Lane] = l
		e.seqOwner[a.Seq] = int64(a.Lane)
		e.touch(l)
	}
	ran, err := e.step(p)
	if ran && e.OnStep != nil {
		e.OnStep(e.ticks)
	}
	for _, l := range e.touched {
		ev.Lanes = append(ev.Lanes, engine.LaneEvent{
			Lane: l.tag, Finish: l.finish, Prefilled: uint32(l.prefilled),
			NPast: uint32(len(e.seqs[l.seq])), Generated: uint32(l.generated),
		})
	}
	if e.Trace != nil {
		e.traceEvents(ev, err)
	}
	return ev, err
}

func (e *Fake) touch(l *lane) {
	if l.touchedAt != e.ticks {
		l.touchedAt = e.ticks
		e.touched = append(e.touched, l)
	}
}

// step runs the plan's step: every prefill chunk beside one token per
// decoding lane. It reports false when there was nothing to run.
func (e *Fake) step(p *engine.Plan) (bool, error) {
	prefill, rows := 0, p.Rows()
	var positions int64 // the rows' positions, summed: their depth cost
	for i := range p.Prefills {
		f := &p.Prefills[i]
		prefill += int(f.Count)
		n := int64(f.Count)
		positions += n*int64(f.Offset) + n*(n-1)/2
	}
	rows -= prefill
	if prefill+rows == 0 {
		return false, nil
	}
	if e.KVCap > 0 && e.kvUsed()+prefill+rows > e.KVCap {
		return false, fail(engine.StatusKVFull, "the KV cache has no room for a step of %d tokens", prefill+rows)
	}
	salt := LoRASalt(p.LoRA)
	e.salt = salt
	// Lanes decoding at the start of the step, before prefills complete.
	decoding := e.decoding[:0]
	defer func() { e.decoding = decoding[:0] }()
	for i := range p.Decodes {
		l := e.lanes[p.Decodes[i].Lane]
		e.touch(l)
		decoding = append(decoding, l)
		n, at := int64(1+p.Decodes[i].DraftLen), int64(len(e.seqs[l.seq]))
		positions += n*at + n*(n-1)/2
	}
	for i := range p.Prefills {
		f := &p.Prefills[i]
		l := e.lanes[f.Lane]
		e.touch(l)
		chunk := l.prompt[f.Offset : f.Offset+f.Count]
		e.saltCells(l.seq, salt)
		e.seqs[l.seq] = append(e.seqs[l.seq], chunk...)
		l.hash = hashTokensUnder(l.hash, chunk, salt)
		l.prefilled += int(f.Count)
		e.ev.Timings.PrefillTokens += f.Count
		if l.prefilled == len(l.prompt) {
			e.sample(l)
		}
	}
	for i, l := range decoding {
		d := &p.Decodes[i]
		e.saltCells(l.seq, salt)
		e.seqs[l.seq] = append(e.seqs[l.seq], l.pending)
		l.hasPending = false
		e.ev.Timings.DecodeTokens++
		// A draft is accepted token by token while the lane samples what
		// the next row fed, as the native engine verifies it (its first
		// SynthAccept tokens taken unverified).
		draft := p.Tokens[d.DraftOff : d.DraftOff+d.DraftLen]
		e.ev.Timings.DraftTokens += d.DraftLen
		for j := 0; ; j++ {
			if j < int(d.SynthAccept) {
				e.commit(l, draft[j], false)
			} else {
				e.sample(l)
			}
			if j == len(draft) || !l.hasPending || l.pending != draft[j] || (d.SynthAccept > 0 && j >= int(d.SynthAccept)) {
				break
			}
			e.ev.Timings.DraftAccepted++
			e.seqs[l.seq] = append(e.seqs[l.seq], draft[j])
			l.hasPending = false
		}
	}
	cost := e.Cost.Step + time.Duration(prefill)*e.Cost.PrefillToken + time.Duration(rows)*e.Cost.DecodeRow +
		time.Duration(positions)*e.Cost.PerPosition
	e.ev.Timings.StepNS = int64(cost)
	if e.clock != nil {
		e.clock.Advance(cost)
	}
	return true, nil
}

// sample draws the lane's next token from the hash of its history.
func (e *Fake) sample(l *lane) {
	t, eog := nextToken(l.hash, e.EOGEvery, e.desc.Vocab)
	if seq := e.seqs[l.seq]; e.Period > 0 && len(seq) >= e.Period {
		t, eog = seq[len(seq)-e.Period], false
	}
	e.commit(l, t, eog)
}

// commit makes t the lane's next token (eog: the model ended there).
func (e *Fake) commit(l *lane, t engine.Token, eog bool) {
	eog = eog || t == EOS
	l.hash = hashTokensUnder(l.hash, []engine.Token{t}, e.salt)
	l.generated++
	if l.grammar {
		e.ev.Timings.GrammarFast++
	}
	te := engine.TokenEvent{Lane: l.tag, Token: t}
	if l.logprobs > 0 {
		te.Logprob = -float32(t%7) / 10
		te.TopOff = uint32(len(e.ev.Top))
		for k := range l.logprobs {
			e.ev.Top = append(e.ev.Top, engine.TopLogprob{Token: (t + engine.Token(k)) % engine.Token(e.desc.Vocab), Logprob: -float32(k) / 4})
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

func hashTokens(h uint64, ts []engine.Token) uint64 { return hashTokensUnder(h, ts, 0) }

// hashTokensUnder is the history's hash with its tokens computed under the
// LoRA salt: the fake model's adapters change every row they touch.
func hashTokensUnder(h uint64, ts []engine.Token, salt uint64) uint64 {
	for _, t := range ts {
		h ^= uint64(uint32(t)) ^ salt
		h *= fnvPrime
	}
	return h
}

// LoRASalt is the fake model's trace of a step's adapter scales: 0 for no
// adapter (none, or every scale zero), else a hash of the scales.
func LoRASalt(scales []float32) uint64 {
	h := uint64(0)
	for _, s := range scales {
		if s != 0 {
			h = fnvOffset
			break
		}
	}
	if h == 0 {
		return 0
	}
	for _, s := range scales {
		h ^= uint64(math.Float32bits(s))
		h *= fnvPrime
	}
	return h | 1
}

// saltCells records that cells computed under salt join seq: a sequence
// whose cells mix sets gets a salt no set has, so every lane seeded from
// it differs from its reference.
func (e *Fake) saltCells(seq int32, salt uint64) {
	switch {
	case len(e.seqs[seq]) == 0:
		e.seqSalt[seq] = salt
	case e.seqSalt[seq] != salt:
		e.seqSalt[seq] = mixedSalt
	}
}

const mixedSalt = 0x6d6978656421

// nextToken is the fake model: the token after a history whose hash is h,
// in a vocabulary of vocab tokens.
func nextToken(h uint64, eogEvery uint64, vocab int) (engine.Token, bool) {
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	if eogEvery > 0 && (h>>8)%eogEvery == 0 {
		return EOS, true
	}
	return engine.Token(3 + h%uint64(vocab-3)), false
}

// Reference is what the fake model generates for prompt, run straight
// through with nothing else around: the output every schedule must match.
func Reference(prompt []engine.Token, maxTokens int, eogEvery uint64, stop []engine.Token, ctx int) []engine.Token {
	return ReferenceUnder(prompt, maxTokens, eogEvery, stop, ctx, nil)
}

// ReferenceUnder is Reference with every step under the LoRA scales lora.
func ReferenceUnder(prompt []engine.Token, maxTokens int, eogEvery uint64, stop []engine.Token, ctx int, lora []float32) []engine.Token {
	salt := LoRASalt(lora)
	h := hashTokensUnder(fnvOffset, prompt, salt)
	var out []engine.Token
	n := len(prompt)
	for {
		t, eog := nextToken(h, eogEvery, Vocab)
		h = hashTokensUnder(h, []engine.Token{t}, salt)
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

// ClonePlan copies a plan's records (not its tokens and biases).
func ClonePlan(p *engine.Plan) engine.Plan {
	return engine.Plan{
		Retires:  append([]uint32(nil), p.Retires...),
		Admits:   append([]engine.Admit(nil), p.Admits...),
		Prefills: append([]engine.Prefill(nil), p.Prefills...),
		Decodes:  append([]engine.Decode(nil), p.Decodes...),
		LoRA:     append([]float32(nil), p.LoRA...),
	}
}

// RowWidth is the floats in one of the fake model's embedding rows.
const RowWidth = 4

var _ engine.RowPrefiller = (*Fake)(nil)

// RowWidth implements engine.RowPrefiller.
func (e *Fake) RowWidth() int { return RowWidth }

// RowToken is the token a row enters a fake sequence as: outside the
// vocabulary (no prompt token is one) and a function of the row's bits, so
// what the fake samples after an image depends on the image, as a real
// model's does.
func RowToken(row []float32) engine.Token {
	h := uint64(fnvOffset)
	for _, v := range row {
		h ^= uint64(math.Float32bits(v))
		h *= fnvPrime
	}
	return engine.Token(Vocab + int(h%(1<<20)))
}

// PrefillRows implements engine.RowPrefiller as the native engine does:
// the rows go at the lane's next prompt positions, which must end before
// its last one; the step's cost is a prefill of as many tokens.
func (e *Fake) PrefillRows(tag uint32, rows []float32) error {
	fail := func(st engine.Status, format string, a ...any) error {
		return &engine.Error{Status: st, Op: "prefill rows", Msg: fmt.Sprintf(format, a...)}
	}
	l := e.lanes[tag]
	n := len(rows) / RowWidth
	switch {
	case l == nil:
		return fail(engine.StatusUnknownLane, "unknown lane %d", tag)
	case n == 0 || len(rows)%RowWidth != 0:
		return fail(engine.StatusInvalid, "%d floats are not whole rows of %d", len(rows), RowWidth)
	case l.prefilled+n >= len(l.prompt):
		return fail(engine.StatusPastPrompt, "rows [%d, +%d) reach the end of a %d-token prompt", l.prefilled, n, len(l.prompt))
	case e.KVCap > 0 && e.kvUsed()+n > e.KVCap:
		return fail(engine.StatusKVFull, "the KV cache has no room for %d rows", n)
	}
	for i := range n {
		t := RowToken(rows[i*RowWidth : (i+1)*RowWidth])
		e.seqs[l.seq] = append(e.seqs[l.seq], t)
		l.hash = hashTokensUnder(l.hash, []engine.Token{t}, 0)
	}
	l.prefilled += n
	if e.clock != nil {
		e.clock.Advance(e.Cost.Step + time.Duration(n)*e.Cost.PrefillToken)
	}
	return nil
}
