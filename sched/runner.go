package sched

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"superfluid/engine"
	"superfluid/panics"
)

// Scheduler runs requests on an engine. Run's goroutine owns the engine,
// the cache and every piece of scheduling state; the other methods may be
// called from any goroutine and only hand things to it.
type Scheduler struct {
	eng   engine.Engine
	cfg   Config
	desc  engine.Descriptor
	stats counters
	loop  *loop

	nextID      atomic.Uint64
	outstanding atomic.Int64 // submitted, not yet ended
	expected    atomic.Int64 // announced submissions on their way (Expect)
	divisor     atomic.Int64
	pressure    atomic.Uint32 // a Pressure (SetPressure)
	started     atomic.Bool
	streams     sync.Map // id → *Stream, for Cancel by id

	// The inbox hands submissions to Run. Its mutex guards the inbox and
	// closed, never scheduling state: Submit must not wait out the step in
	// flight (Run takes the inbox in before planning each step), and a
	// submission racing shutdown must be either refused or failed, never
	// lost.
	mu     sync.Mutex
	inbox  []*job
	closed bool
	wake   chan struct{}
}

// New makes a scheduler for eng over cache. It checks cfg against the
// engine's descriptor (errors start "sched: "); nothing runs until Run.
func New(eng engine.Engine, cache Cache, cfg Config) (*Scheduler, error) {
	if eng == nil || cache == nil {
		return nil, errors.New("sched: nil engine or cache")
	}
	d := eng.Descriptor()
	if d == nil {
		return nil, errors.New("sched: engine has no descriptor")
	}
	cfg = cfg.withDefaults(d)
	if err := cfg.validate(d); err != nil {
		return nil, err
	}
	s := &Scheduler{eng: eng, cfg: cfg, desc: *d, wake: make(chan struct{}, 1)}
	s.loop = newLoop(eng, cache, cfg, &s.stats)
	s.loop.ended = s.ended
	s.loop.wake = s.nudge
	s.loop.intake = s.takeInbox
	s.divisor.Store(int64(cfg.BackgroundDivisor))
	return s, nil
}

// nudge wakes Run if it waits. Any goroutine.
func (s *Scheduler) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Config is the validated configuration, defaults filled in.
func (s *Scheduler) Config() Config { return s.cfg }

// Stats reads the live counters; safe from any goroutine at any time.
func (s *Scheduler) Stats() Snapshot {
	snap := s.stats.Snapshot()
	snap.KVCapacity = int64(s.desc.Ctx)
	if t := s.cfg.Speculation.Type; t != "" && t != SpecNone {
		snap.DraftSource = t
	}
	return snap
}

// SetBackgroundDivisor throttles Agent and Background decoding to one step
// in n (n ≤ 1: none) from the next step on.
func (s *Scheduler) SetBackgroundDivisor(n int) { s.divisor.Store(int64(max(n, 1))) }

// Submit queues a request and returns its stream. The request is checked
// against the engine first (empty or over-long prompt, tokens outside the
// vocabulary, sampling out of range). Cancelling ctx cancels the request,
// as Stream.Cancel does. Submit never waits for the scheduler.
func (s *Scheduler) Submit(ctx context.Context, req Request) (*Stream, error) {
	if err := req.validate(&s.desc); err != nil {
		return nil, err
	}
	if _, ok := s.loop.eng.(engine.RowPrefiller); len(req.Media) > 0 && !ok {
		return nil, fmt.Errorf("sched: %w", &engine.Error{Status: engine.StatusUnsupported, Op: "media", Msg: "this engine does not prefill media rows"})
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sched: submit: %w", err)
	}
	// Compiled here, on the caller's goroutine (a cache hit is a lookup),
	// so a grammar that does not parse is the caller's error and the
	// scheduler's tick never waits on a parse.
	gid, err := s.acquireGrammar(req.Grammar)
	if err != nil {
		return nil, err
	}
	j := s.newJob(&req)
	j.grammar = gid
	j.api = apiOf(ctx)
	// Stamped here, not when the runner takes the job in after the step in
	// flight: that wait is part of the request's queue wait and TTFT.
	j.submitted = s.cfg.Clock.Now()
	st := j.stream
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		s.loop.releaseGrammar(j)
		return nil, ErrClosed
	case s.outstanding.Load() >= int64(s.cfg.MaxQueued+s.cfg.Lanes):
		s.mu.Unlock()
		s.loop.releaseGrammar(j)
		return nil, ErrQueueFull
	}
	s.outstanding.Add(1)
	if o := s.cfg.Observer; o != nil {
		// Under the mutex, before the runner can see the job: obs is
		// the runner's to read from then on.
		j.obs = o.Start(ctx, ObservedRequest{ID: j.id, Class: j.class, PromptTokens: j.promptLen, MaxTokens: j.maxTokens, Submitted: j.submitted})
	}
	s.streams.Store(st.id, st)
	st.stopCtx = context.AfterFunc(ctx, st.Cancel)
	s.inbox = append(s.inbox, j)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if t := s.cfg.Arbiter; t != nil && req.Class.interactive() {
		t.raise(req.Class) // the runner may be waiting for its turn (loop_turn.go)
	}
	return st, nil
}

// acquireGrammar compiles (or finds compiled) a request's grammar.
func (s *Scheduler) acquireGrammar(g *engine.GrammarSpec) (engine.GrammarID, error) {
	if g == nil {
		return 0, nil
	}
	if s.loop.grammars == nil {
		return 0, fmt.Errorf("sched: grammar: %w",
			&engine.Error{Status: engine.StatusUnsupported, Op: "grammar", Msg: "this engine does not constrain output"})
	}
	id, err := s.loop.grammars.AcquireGrammar(g)
	if err != nil {
		return 0, fmt.Errorf("sched: grammar: %w", err)
	}
	return id, nil
}

func (s *Scheduler) newJob(req *Request) *job {
	return newJob(s.nextID.Add(1), req)
}

// newJob makes a job of a validated request, copying what the caller may
// reuse.
func newJob(id uint64, req *Request) *job {
	j := &job{
		id:        id,
		class:     req.Class,
		whole:     req.Whole,
		prompt:    append([]engine.Token(nil), req.Prompt...),
		promptLen: len(req.Prompt),
		maxTokens: req.MaxTokens,
		sampling:  req.Sampling,
		logprobs:  req.Logprobs,
		bias:      append([]engine.LogitBias(nil), req.Bias...),
		stop:      append([]engine.Token(nil), req.StopTokens...),
		deadline:  req.Deadline,
		adapters:  newAdapterSet(req.LoRA),
		cacheNS:   -1,
	}
	if j.sampling == (engine.Sampling{}) {
		j.sampling = engine.Greedy()
	}
	j.keyMedia(req.Media)
	j.mediaDone = req.MediaDone
	j.stream = newStream(id, req.Class)
	return j
}

// Cancel cancels the request with the given stream ID; false if it is not
// running or queued.
func (s *Scheduler) Cancel(id uint64) bool {
	v, ok := s.streams.Load(id)
	if ok {
		v.(*Stream).Cancel()
	}
	return ok
}

// ended is the loop's word that a job's stream has its result.
func (s *Scheduler) ended(j *job) {
	s.streams.Delete(j.id)
	s.outstanding.Add(-1)
}

// Run schedules until ctx ends (or, under an arbiter, the engine's turn
// leaves it: Turn.Leave), then fails whatever is queued or running with
// ErrClosed, retires every lane (publishing its sequence to the cache) and
// returns nil. It starts no goroutine and leaves none behind; call it
// once.
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("sched: Run called twice")
	}
	defer s.shutdown()
	busy := false
	for {
		if !busy {
			select {
			case <-ctx.Done():
				return nil
			case <-s.wake:
			}
		}
		if !busy && s.loop.p.idle() {
			s.gatherBurst(ctx) // burst.go
		}
		if ctx.Err() != nil {
			return nil
		}
		s.takeInbox()
		s.loop.p.bgDivisor = int(s.divisor.Load())
		s.loop.setPressure(Pressure(s.pressure.Load()))
		busy = s.step(ctx)
		if s.loop.turnErr != nil {
			return nil
		}
	}
}

// step runs one loop step. The engine's and the cache's panics are the
// loop's errors already (loop.tick, loop.acquire), failing the work at
// fault; a panic left is the loop's own bookkeeping on the lanes of this
// step, so those lanes fail and the runner carries on with what is queued.
func (s *Scheduler) step(ctx context.Context) (busy bool) {
	defer func() {
		if v := recover(); v != nil {
			err := panics.Recovered(panics.Scheduler, v, "in", "scheduling step", "lanes", len(s.loop.p.lanes))
			l := s.loop
			now := l.clock.Now()
			l.abandonLanes(fmt.Errorf("sched: %w", err), now)
			l.flush()
			l.p.publishOccupancy()
			busy = true
		}
	}()
	return s.loop.step(ctx)
}

// takeInbox queues what Submit handed over.
func (s *Scheduler) takeInbox() {
	s.mu.Lock()
	in := s.inbox
	s.inbox = nil
	s.mu.Unlock()
	for _, j := range in {
		s.loop.submit(j)
	}
}

func (s *Scheduler) shutdown() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.takeInbox()
	if s.loop.turn != nil {
		s.loop.turn.drop() // a step reserved for a next step that never comes
	}
	s.loop.close()
}
