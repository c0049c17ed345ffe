package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"superfluid/cgo"
	"superfluid/engine"
	"superfluid/kv"
	"superfluid/park"
	"superfluid/sched"
)

// The scheduler tests drive sched over the real engine (llama.cpp through
// cgo) on a synthetic model, without HTTP: what they check is the
// scheduler's and the prefix cache's promises — warm admission, lossless
// preemption, prompt cancellation, correct output under concurrency — on
// the engine's real numerics, which the fake engine in package sched cannot
// speak for. Every correct output is defined by refEngine: the same
// request run alone, straight on an engine, with no scheduler and no cache.

// stackConfig sizes a scheduler stack. Zero fields take the defaults in
// newSchedStack.
type stackConfig struct {
	model   string
	ctx     int
	lanes   int
	seqs    int
	batch   int
	threads int
	kv      kv.Config // Seqs is the engine's
	sched   sched.Config
	// parkDir, when set, gives the cache a park store there.
	parkDir string
	// draftModel, when set, is opened as sched's drafter (draft-simple).
	draftModel string
}

// schedStack is engine → prefix cache → scheduler, built the way app.Start
// builds it, with a spyEngine between the scheduler and the engine.
type schedStack struct {
	eng   *spyEngine
	cache *kv.Cache
	s     *sched.Scheduler
	draft *cgo.Engine // the draft model's engine; nil without one

	stopRun context.CancelFunc
	runDone chan error
	closed  bool
}

func newSchedStack(t testing.TB, c stackConfig) *schedStack {
	t.Helper()
	if c.model == "" {
		c.model = tinyModel(t)
	}
	if c.ctx == 0 {
		c.ctx = 4096
	}
	if c.lanes == 0 {
		c.lanes = 4
	}
	if c.seqs == 0 {
		c.seqs = 4 * c.lanes
	}
	if c.batch == 0 {
		c.batch = 512
	}
	if c.threads == 0 {
		c.threads = 1 // greedy outputs do not depend on it; the cores are shared
	}
	raw, err := cgo.Open(cgo.Options{ModelPath: c.model, Ctx: c.ctx, Lanes: c.lanes, Seqs: c.seqs, Batch: c.batch, Threads: c.threads, DraftMax: draftBoundOf(c.sched.Speculation)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	spy := &spyEngine{Engine: raw}
	desc := raw.Descriptor()
	kc := c.kv
	kc.Seqs = desc.Seqs
	if c.parkDir != "" {
		store, err := park.Open(park.Config{Dir: c.parkDir, Identity: desc.Identity, KVType: desc.CacheTypeK, VType: desc.CacheTypeV, VLayout: park.VRows})
		if err != nil {
			raw.Close()
			t.Fatal(err)
		}
		kc.Park = store
	}
	cache, err := kv.New(spy, kc)
	if err != nil {
		raw.Close()
		t.Fatal(err)
	}
	sc := c.sched
	if sc.Lanes == 0 {
		sc.Lanes = c.lanes
	}
	var draft *cgo.Engine
	if c.draftModel != "" {
		draft, err = cgo.Open(cgo.Options{ModelPath: c.draftModel, Ctx: c.ctx, Lanes: c.lanes, Seqs: c.lanes, Threads: c.threads})
		if err != nil {
			raw.Close()
			t.Fatalf("open the draft model: %v", err)
		}
		dr, err := cgo.NewDrafter(draft, raw, 0)
		if err != nil {
			draft.Close()
			raw.Close()
			t.Fatal(err)
		}
		sc.Speculation.Drafter = dr
	}
	s, err := sched.New(spy, cache, sc)
	if err != nil {
		raw.Close()
		if draft != nil {
			draft.Close()
		}
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &schedStack{eng: spy, cache: cache, s: s, draft: draft, stopRun: cancel, runDone: make(chan error, 1)}
	go func() { st.runDone <- s.Run(ctx) }()
	t.Cleanup(func() { st.close(t) })
	return st
}

// close stops the scheduler, waits for Run to return and frees the engine.
// Safe to call twice (the cleanup calls it again).
func (st *schedStack) close(t testing.TB) {
	if st.closed {
		return
	}
	st.closed = true
	st.stopRun()
	if err := <-st.runDone; err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := st.cache.Close(); err != nil { // parks, before the engine goes
		t.Errorf("cache close: %v", err)
	}
	st.eng.Close()
	if st.draft != nil {
		st.draft.Close()
	}
}

// run submits req and collects its tokens and result.
func (st *schedStack) run(t testing.TB, req sched.Request) ([]engine.Token, sched.Result) {
	t.Helper()
	s, err := st.s.Submit(context.Background(), req)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return collectStream(t, s)
}

// collectStream reads a stream to its end.
func collectStream(t testing.TB, s *sched.Stream) ([]engine.Token, sched.Result) {
	t.Helper()
	toks, res, err := s.Collect(context.Background())
	if err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := make([]engine.Token, len(toks))
	for i, tk := range toks {
		out[i] = tk.Token
	}
	return out, res
}

// spyEngine is the real engine with a window onto its ticks. It records
// what each plan asked of each lane and what the tick did, and runs an
// optional hook just before a tick, on the scheduler's goroutine: that is
// how a test acts at an exact point of the schedule (cancel just as a long
// decode tick starts; hold the scheduler while requests arrive) instead of
// at a moment in time, which on a shared two-core machine is no point at
// all.
type spyEngine struct {
	*cgo.Engine

	mu     sync.Mutex
	ticks  []tickRecord
	before func(i int, p *engine.Plan)
	after  func(i int, rec *tickRecord)
	// reported counts each lane's tokens as the engine reports them, each
	// step's before the scheduler sees them.
	reported map[uint32]int
}

// tickRecord is one Tick: the plan's work per lane tag and the events.
type tickRecord struct {
	retires   []uint32
	admits    []engine.Admit
	prefill   map[uint32]int // lane → prompt tokens planned
	decodes   map[uint32]int // lane → 1 if the step decodes it
	sampled   map[uint32]int // lane → tokens the engine sampled
	prefilled int            // prompt tokens the step prefilled
	err       error
}

func (s *spyEngine) Tick(p *engine.Plan) (*engine.Events, error) {
	rec := tickRecord{
		retires: slices.Clone(p.Retires),
		admits:  slices.Clone(p.Admits),
		prefill: map[uint32]int{},
		decodes: map[uint32]int{},
		sampled: map[uint32]int{},
	}
	for _, pf := range p.Prefills {
		rec.prefill[pf.Lane] += int(pf.Count)
	}
	for _, d := range p.Decodes {
		rec.decodes[d.Lane]++
	}
	s.mu.Lock()
	i := len(s.ticks)
	s.ticks = append(s.ticks, rec)
	before := s.before
	s.mu.Unlock()
	if before != nil {
		before(i, p)
	}
	ev, err := s.Engine.Tick(p)
	rec.err = err
	if ev != nil {
		for _, te := range ev.Tokens {
			rec.sampled[te.Lane]++
		}
		rec.prefilled = int(ev.Timings.PrefillTokens)
	}
	s.mu.Lock()
	if s.reported == nil {
		s.reported = map[uint32]int{}
	}
	for l, n := range rec.sampled {
		s.reported[l] += n
	}
	s.ticks[i] = rec
	after := s.after
	s.mu.Unlock()
	if after != nil {
		after(i, &rec)
	}
	return ev, err
}

// reportedFor is how many tokens the engine has reported for lane so far.
func (s *spyEngine) reportedFor(lane uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reported[lane]
}

// setBefore installs (nil: removes) the hook run before each tick.
func (s *spyEngine) setBefore(f func(i int, p *engine.Plan)) {
	s.mu.Lock()
	s.before = f
	s.mu.Unlock()
}

// setAfter installs (nil: removes) the hook run after each tick.
func (s *spyEngine) setAfter(f func(i int, rec *tickRecord)) {
	s.mu.Lock()
	s.after = f
	s.mu.Unlock()
}

// log returns a copy of the tick records so far.
func (s *spyEngine) log() []tickRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ticks)
}

// laneAdmitted finds the tag of the lane admitted with prompt (the first such).
func laneAdmitted(log []tickRecord, promptLen int) (uint32, bool) {
	for _, r := range log {
		for _, a := range r.admits {
			if int(a.PromptLen) == promptLen {
				return a.Lane, true
			}
		}
	}
	return 0, false
}

// refEngine runs requests alone, straight on an engine: one lane, no
// scheduler, no cache, the prompt prefilled in whole batches. Its greedy
// output is what "the same request run alone" produces.
type refEngine struct {
	e *cgo.Engine
}

func newRefEngine(t testing.TB, model string, ctx int) *refEngine {
	t.Helper()
	e, err := cgo.Open(cgo.Options{ModelPath: model, Ctx: ctx, Lanes: 1, Seqs: 1, Batch: 512, Threads: 1})
	if err != nil {
		t.Fatalf("open the reference engine: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return &refEngine{e: e}
}

// run runs a greedy request of maxTokens to its end, with the top logprobs
// of each position when logprobs > 0 (asking for them changes no token).
func (r *refEngine) run(t testing.TB, prompt []engine.Token, maxTokens, logprobs int) ([]engine.Token, [][]engine.TopLogprob) {
	t.Helper()
	const lane = 1
	if err := r.e.Free(0); err != nil {
		t.Fatal(err)
	}
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: lane, Seq: 0, MaxTokens: uint32(maxTokens), Logprobs: int32(logprobs), Sampling: engine.Greedy()}, prompt, nil)
	batch := r.e.Descriptor().Batch
	var out []engine.Token
	var tops [][]engine.TopLogprob
	for done, fed := false, 0; !done; {
		if fed < len(prompt) {
			n := min(batch, len(prompt)-fed)
			p.Prefills = append(p.Prefills, engine.Prefill{Lane: lane, Offset: uint32(fed), Count: uint32(n)})
			fed += n
		} else {
			p.Decodes = append(p.Decodes, engine.Decode{Lane: lane})
		}
		ev, err := r.e.Tick(&p)
		if err != nil {
			t.Fatalf("reference tick: %v", err)
		}
		p.Reset()
		for i := range ev.Tokens {
			te := &ev.Tokens[i]
			out = append(out, te.Token)
			tops = append(tops, slices.Clone(ev.TopOf(te)))
			done = done || te.Finish != engine.FinishNone
		}
	}
	p.Reset()
	p.Retires = append(p.Retires, lane)
	if _, err := r.e.Tick(&p); err != nil {
		t.Fatal(err)
	}
	return out, tops
}

// tieNats is how close two candidates' log-probabilities must be for the
// engine's rounding to decide between them. llama.cpp's CPU kernels do not
// promise the same bits for a sequence whatever else shares its batch and
// KV pool: attention sums over the pool's cells in cell order, and where a
// sequence's cells lie depends on every other lane (interleaved in a
// unified pool; reused holes after a free). So a lane's logits may differ
// from a solo run's in the last bits, and where the two best tokens are
// that close, greedy decoding may take either. Flash attention (on by
// default) widens the margin: its CPU kernel accumulates V in f16, so the
// order of the cells moves a logit by up to ~1e-3 nats.
const tieNats = 1e-2

// check reports whether got is what prompt produces run alone: the same
// tokens, except that at a near-tie (the solo run's two best candidates
// within tieNats) got may take the other branch — after which it must
// continue as a solo run given that branch does. It returns the near-ties
// taken, or a description of the first real difference.
func (r *refEngine) check(t testing.TB, prompt, got []engine.Token, maxTokens int) (ties []float32, bad string) {
	t.Helper()
	for pos := 0; ; {
		switch {
		case pos == len(got) && pos == maxTokens:
			return ties, ""
		case pos == len(got) || pos == maxTokens:
			return ties, fmt.Sprintf("%d tokens generated, %d wanted", len(got), maxTokens)
		}
		ref, tops := r.run(t, joinTokens(prompt, got[:pos]), maxTokens-pos, 5)
		rest := got[pos:]
		d := tokensInCommon(rest, ref)
		if d == len(rest) && d == len(ref) {
			return ties, ""
		}
		if d == len(rest) || d == len(ref) {
			return ties, fmt.Sprintf("%d tokens, alone %d", len(got), pos+len(ref))
		}
		var best, mine float32
		found := false
		for _, c := range tops[d] {
			if c.Token == ref[d] {
				best = c.Logprob
			}
			if c.Token == rest[d] {
				mine, found = c.Logprob, true
			}
		}
		if !found || best-mine > tieNats {
			return ties, fmt.Sprintf("at token %d: got %d, alone %d (top %v): %s", pos+d, rest[d], ref[d], tops[d], tokenDiff(rest, ref))
		}
		ties = append(ties, best-mine)
		pos += d + 1
	}
}

// promptWords is what prompts are made of: ordinary text, so that prompts are
// the token streams a tokenizer really produces.
var promptWords = strings.Fields(`the engine scheduler cache prefix token lane request model
	server editor agent chat batch prompt reply stream context sequence class queue tick
	prefill decode budget grant yield cancel deadline publish evict resident host park
	zstd radix tree node edge depth match share copy truncate free import export digest
	quick brown fox jumps over lazy dog while compiler builds function value return error`)

// textTokens returns n tokens of pseudo-random text; the same salt gives
// the same tokens, different salts different ones.
func textTokens(t testing.TB, e *cgo.Engine, n int, salt uint64) []engine.Token {
	t.Helper()
	rng := rand.New(rand.NewPCG(salt, 0x5eed))
	var out []engine.Token
	for len(out) < n {
		var b strings.Builder
		for range 32 {
			b.WriteString(" ")
			b.WriteString(promptWords[rng.IntN(len(promptWords))])
		}
		toks, err := e.Tokenize(b.String(), false, false)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, toks...)
	}
	return out[:n]
}

func joinTokens(parts ...[]engine.Token) []engine.Token {
	var out []engine.Token
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func tokensInCommon(a, b []engine.Token) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// tokenDiff describes where two outputs part, for failure messages.
func tokenDiff(got, want []engine.Token) string {
	i := tokensInCommon(got, want)
	return fmt.Sprintf("lengths %d/%d, first difference at %d: got %v, want %v", len(got), len(want), i, got[i:min(i+8, len(got))], want[i:min(i+8, len(want))])
}

// goroutineIDs lists the live goroutines' ids.
func goroutineIDs() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	out := map[string]string{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		if m := goroutineHeader.FindStringSubmatch(g); m != nil {
			out[m[1]] = g
		}
	}
	return out
}

var goroutineHeader = regexp.MustCompile(`^goroutine (\d+) `)

// leakedGoroutines waits (boundedly) for every goroutine of this module
// that is not in before to end, and returns the stacks of those that did
// not. Polling with a deadline, as goleak does: a goroutine that has been
// told to stop may take a moment to be scheduled and return. Goroutines
// with no frame of ours (a timer or connection an earlier test left to
// wind down) are not the stack's to answer for.
func leakedGoroutines(before map[string]string) []string {
	deadline := time.Now().Add(5 * time.Second)
	for {
		var leaked []string
		for id, stack := range goroutineIDs() {
			if _, ok := before[id]; !ok && strings.Contains(stack, "superfluid/") {
				leaked = append(leaked, stack)
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// expectAlone fails t unless got is what prompt produces run alone (see
// refEngine.check), and logs the near-ties it took.
func expectAlone(t testing.TB, r *refEngine, what string, prompt, got []engine.Token, maxTokens int) {
	t.Helper()
	ties, bad := r.check(t, prompt, got, maxTokens)
	if bad != "" {
		t.Errorf("%s: output differs from the request run alone: %s", what, bad)
	}
	if len(ties) > 0 {
		t.Logf("%s: took %d near-tie(s) the other way (gaps %v nats)", what, len(ties), ties)
	}
}

// draftBoundOf is the draft bound an engine is opened with for sp, as the
// app opens it: a recurrent or hybrid model keeps that many rollback
// snapshots (0: no speculation).
func draftBoundOf(sp sched.Speculation) int {
	switch {
	case sp.Type == "" || sp.Type == sched.SpecNone:
		return 0
	case sp.DraftMax > 0:
		return sp.DraftMax
	}
	return sched.DefaultDraftMax
}
