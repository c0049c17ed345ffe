package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/sched"
)

// A second request sharing a 1,000-token prefix with the first prefills
// only what follows the cached prefix, and its greedy output is what the
// same request produces cold on a fresh stack (and alone on an engine).
func TestSchedSharedPrefixIsPrefilledOnce(t *testing.T) {
	st := newSchedStack(t, stackConfig{lanes: 2})
	ref := newRefEngine(t, tinyModel(t), 4096)
	prefix := textTokens(t, st.eng.Engine, 1000, 1)
	a := sched.Request{Prompt: joinTokens(prefix, textTokens(t, st.eng.Engine, 40, 2)), Class: sched.Chat, MaxTokens: 32}
	b := sched.Request{Prompt: joinTokens(prefix, textTokens(t, st.eng.Engine, 60, 3)), Class: sched.Chat, MaxTokens: 32}

	outA, resA := st.run(t, a)
	if resA.Err != nil || resA.CachedTokens != 0 || resA.Finish != sched.FinishLength {
		t.Fatalf("first request: %+v", resA)
	}
	before := st.s.Stats()
	outB, resB := st.run(t, b)
	after := st.s.Stats()
	// The cache holds the first request's prompt and reply (its last
	// sampled token never entered the sequence); the second shares the
	// 1,000-token prefix with it, and perhaps a word more by chance.
	shared := tokensInCommon(joinTokens(a.Prompt, outA[:len(outA)-1]), b.Prompt)
	if shared < 1000 {
		t.Fatalf("the prompts share %d tokens, want at least 1000", shared)
	}
	if resB.Err != nil || resB.CachedTokens != shared {
		t.Fatalf("second request: cached %d, want %d (%+v)", resB.CachedTokens, shared, resB)
	}
	if got, want := after.PrefillTokens-before.PrefillTokens, uint64(len(b.Prompt)-shared); got != want {
		t.Errorf("the second request prefilled %d tokens, want %d (what follows the cached prefix)", got, want)
	}
	if got := after.WarmPrefixTokens - before.WarmPrefixTokens; got != uint64(shared) {
		t.Errorf("warm prefix tokens grew by %d, want %d", got, shared)
	}

	cold := newSchedStack(t, stackConfig{lanes: 2})
	outCold, resCold := cold.run(t, b)
	if resCold.CachedTokens != 0 || cold.s.Stats().PrefillTokens != uint64(len(b.Prompt)) {
		t.Fatalf("the fresh stack was not cold: %+v, %+v", resCold, cold.s.Stats())
	}
	// Warm and cold are the same greedy run; their bits may differ only
	// where the cached cells lie in the pool (see tieNats).
	expectAlone(t, ref, "warm", b.Prompt, outB, b.MaxTokens)
	expectAlone(t, ref, "cold", b.Prompt, outCold, b.MaxTokens)
	if !slices.Equal(outB, outCold) {
		t.Logf("warm and cold took a near-tie differently: %s", tokenDiff(outB, outCold))
	}
	expectAlone(t, ref, "first", a.Prompt, outA, a.MaxTokens)
}

// A Background lane preempted by Chat requests that fill every lane
// resumes warm — prefilling only the one token it had sampled but not fed
// back — and its final output equals an unpreempted run's.
func TestSchedPreemptedBackgroundLaneMatchesUnpreemptedRun(t *testing.T) {
	st := newSchedStack(t, stackConfig{lanes: 4})
	ref := newRefEngine(t, tinyModel(t), 4096)
	e := st.eng.Engine
	bg := sched.Request{Prompt: textTokens(t, e, 200, 10), Class: sched.Background, MaxTokens: 600}
	var chats []sched.Request
	for i := range 4 {
		chats = append(chats, sched.Request{Prompt: textTokens(t, e, 30, uint64(11+i)), Class: sched.Chat, MaxTokens: 48})
	}

	// Hold the scheduler at the background lane's first decode-only tick
	// (it is generating, and alone) while the chats arrive, so that they
	// all wait at once: three take the free lanes, the fourth preempts.
	blocked, release := make(chan struct{}), make(chan struct{})
	st.eng.setBefore(func(_ int, p *engine.Plan) {
		if len(p.Decodes) == 1 && len(p.Prefills) == 0 && len(p.Admits) == 0 {
			st.eng.setBefore(nil)
			close(blocked)
			<-release
		}
	})
	bgStream, err := st.s.Submit(context.Background(), bg)
	if err != nil {
		t.Fatal(err)
	}
	<-blocked
	var chatStreams []*sched.Stream
	for _, c := range chats {
		s, err := st.s.Submit(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		chatStreams = append(chatStreams, s)
	}
	close(release)

	for i, s := range chatStreams {
		out, res := collectStream(t, s)
		if res.Err != nil || res.Finish != sched.FinishLength {
			t.Errorf("chat %d: %+v", i, res)
		}
		expectAlone(t, ref, fmt.Sprintf("chat %d", i), chats[i].Prompt, out, chats[i].MaxTokens)
	}
	out, res := collectStream(t, bgStream)
	if res.Err != nil || res.Finish != sched.FinishLength || res.Generated != bg.MaxTokens {
		t.Fatalf("background: %+v", res)
	}
	if res.Preemptions == 0 {
		t.Fatalf("the background lane was never preempted: %+v; stats %+v", res, st.s.Stats())
	}
	expectAlone(t, ref, "preempted background", bg.Prompt, out, bg.MaxTokens)
	resumed := 0
	for _, r := range st.eng.log() {
		for _, a := range r.admits {
			if a.PromptLen > uint32(len(bg.Prompt)) {
				resumed++
				if a.Cached != a.PromptLen-1 {
					t.Errorf("a resumption of %d tokens found %d cached, want all but its last", a.PromptLen, a.Cached)
				}
			}
		}
	}
	if resumed != res.Preemptions {
		t.Errorf("%d resumptions for %d preemptions", resumed, res.Preemptions)
	}
}

// A cancelled lane is gone within one engine step, and no token sampled
// after Cancel returns reaches its client. First Cancel lands between two
// steps in which both lanes decode: it is called from the hook after a
// Tick, on the scheduler's goroutine, so the check is exact rather than a
// race against the clock: the next step retires the lane, and the other
// lane loses nothing. Then a client cancels the ordinary way, from its own
// goroutine while reading: whenever that lands, the engine samples at most
// the one step in progress for the lane, and the client gets none of it.
func TestSchedCancelledLaneIsGoneWithinOneStep(t *testing.T) {
	st := newSchedStack(t, stackConfig{lanes: 2})
	ref := newRefEngine(t, tinyModel(t), 4096)
	e := st.eng.Engine
	a := sched.Request{Prompt: textTokens(t, e, 50, 20), Class: sched.Chat, MaxTokens: 2000}
	b := sched.Request{Prompt: textTokens(t, e, 60, 21), Class: sched.Chat, MaxTokens: 400}

	var streamA atomic.Pointer[sched.Stream]
	cancelTick, delivered := -1, 0
	st.eng.setAfter(func(tick int, r *tickRecord) {
		sa := streamA.Load()
		tagA, ok := laneAdmitted(st.eng.log(), len(a.Prompt))
		if cancelTick >= 0 || sa == nil || !ok || len(r.prefill) > 0 || len(r.decodes) != 2 || r.decodes[tagA] != 1 || st.eng.reportedFor(tagA) < 64 {
			return
		}
		// The scheduler has not seen this step's token yet: cancelled
		// first, it is never delivered.
		cancelTick, delivered = tick, st.eng.reportedFor(tagA)-r.sampled[tagA]
		sa.Cancel()
	})
	sa, err := st.s.Submit(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	streamA.Store(sa)
	streamB, err := st.s.Submit(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	outA, resA := collectStream(t, sa)
	outB, resB := collectStream(t, streamB)

	if cancelTick < 0 {
		t.Fatal("the cancel never happened")
	}
	log := st.eng.log()
	tagA, _ := laneAdmitted(log, len(a.Prompt))
	if next := log[cancelTick+1]; !slices.Contains(next.retires, tagA) {
		t.Errorf("the step after the cancel did not retire the lane: %+v", next)
	}
	for i, r := range log[cancelTick+1:] {
		if r.decodes[tagA]+r.prefill[tagA]+r.sampled[tagA] > 0 {
			t.Errorf("step %d after the cancel still ran the cancelled lane: %+v", i+1, r)
		}
	}
	if resA.Finish != sched.FinishCancelled || resA.Err != nil || resA.Generated != delivered || len(outA) != delivered {
		t.Errorf("cancelled request: %d tokens read, result %+v; want the %d sampled before the cancel", len(outA), resA, delivered)
	}
	expectAlone(t, ref, "cancelled", a.Prompt, outA, len(outA))
	if resB.Finish != sched.FinishLength {
		t.Errorf("the other lane: %+v", resB)
	}
	expectAlone(t, ref, "the other lane", b.Prompt, outB, b.MaxTokens)

	c := sched.Request{Prompt: textTokens(t, e, 70, 22), Class: sched.Chat, MaxTokens: 3000}
	sc, err := st.s.Submit(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	var outC []engine.Token
	for range 100 {
		tk, err := sc.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		outC = append(outC, tk.Token)
	}
	sc.Cancel()
	tagC, _ := laneAdmitted(st.eng.log(), len(c.Prompt))
	atCancel := st.eng.reportedFor(tagC)
	rest, resC := collectStream(t, sc)
	outC = append(outC, rest...)
	if after := st.eng.reportedFor(tagC) - atCancel; after > 1 {
		t.Errorf("the engine sampled %d tokens for the lane after Cancel returned; want at most the step in progress", after)
	}
	if resC.Finish != sched.FinishCancelled || resC.Generated > atCancel || resC.Generated != len(outC) {
		t.Errorf("client-cancelled request: %+v; want at most the %d tokens sampled before Cancel returned", resC, atCancel)
	}
	expectAlone(t, ref, "client-cancelled", c.Prompt, outC, len(outC))
	if s := st.s.Stats(); s.Cancelled != 2 {
		t.Errorf("cancelled count %d, want 2", s.Cancelled)
	}
}

// Thirty-two concurrent requests of mixed classes over four lanes all
// complete with the output each has alone, and the stack leaves no
// goroutine behind once stopped. They come in two waves so that the mix
// does what mixed traffic does whatever the machine's timing: the agent
// and background requests fill the lanes, then the chat and FIM requests
// arrive all at once and preempt them. Some share a 200-token prefix.
func TestSchedManyConcurrentMixedRequests(t *testing.T) {
	model := tinyModel(t)
	ref := newRefEngine(t, model, 4096)
	e := ref.e
	shared := textTokens(t, e, 200, 30)
	var reqs []sched.Request
	for i := range 32 {
		prompt := textTokens(t, e, 20+(i*37)%300, uint64(100+i))
		if i%5 == 0 {
			prompt = joinTokens(shared, prompt)
		}
		class := sched.Class(i % sched.NumClasses)
		maxTokens := 8 + (i*7)%40
		if class >= sched.Agent {
			maxTokens *= 3
		}
		reqs = append(reqs, sched.Request{Prompt: prompt, Class: class, MaxTokens: maxTokens})
	}

	before := goroutineIDs()
	st := newSchedStack(t, stackConfig{model: model, lanes: 4})
	outs := make([][]engine.Token, len(reqs))
	results := make([]sched.Result, len(reqs))
	var wg sync.WaitGroup
	// wave starts the requests of the classes in, each on a goroutine of
	// its own as a client would; submitted is done once all are submitted.
	wave := func(in func(sched.Class) bool, submitted *sync.WaitGroup) {
		for _, r := range reqs {
			if in(r.Class) {
				submitted.Add(1)
			}
		}
		for i, r := range reqs {
			if !in(r.Class) {
				continue
			}
			wg.Go(func() {
				s, err := st.s.Submit(context.Background(), r)
				submitted.Done()
				if err != nil {
					t.Errorf("submit %d: %v", i, err)
					return
				}
				toks, res, err := s.Collect(context.Background())
				if err != nil || res.Err != nil || res.Finish != sched.FinishLength {
					t.Errorf("request %d (%s): %v, %+v", i, r.Class, err, res)
					return
				}
				for _, tk := range toks {
					outs[i] = append(outs[i], tk.Token)
				}
				results[i] = res
			})
		}
	}
	interactive := func(c sched.Class) bool { return c <= sched.FIM }
	var wave1, wave2 sync.WaitGroup
	st.eng.setBefore(func(tick int, _ *engine.Plan) {
		switch tick {
		case 0: // the first wave is all queued before anything runs
			wave1.Wait()
		case 1: // the lanes hold agent and background work: the second wave
			st.eng.setBefore(nil)
			wave(interactive, &wave2)
			wave2.Wait()
		}
	})
	wave(func(c sched.Class) bool { return !interactive(c) }, &wave1)
	wg.Wait()
	stats := st.s.Stats()
	st.close(t)
	if stats.Completed != 32 || stats.Admissions < 32 || stats.TickErrors != 0 {
		t.Errorf("stats: %+v", stats)
	}
	if stats.Preemptions == 0 {
		t.Error("no lane was preempted, though chat and FIM requests arrived with every lane busy with worse classes")
	}
	if stats.WarmPrefixTokens == 0 {
		t.Error("no request was admitted warm")
	}
	if after := st.s.Stats(); after.LanesActive != 0 || after.QueueDepth != [sched.NumClasses]int64{} {
		t.Errorf("after stopping: %d lanes active, queues %v", after.LanesActive, after.QueueDepth)
	}
	if leaked := leakedGoroutines(before); len(leaked) > 0 {
		t.Errorf("%d goroutines left behind:\n%s", len(leaked), leaked)
	}
	for i, r := range reqs {
		expectAlone(t, ref, fmt.Sprintf("request %d (%s, preempted %d times)", i, r.Class, results[i].Preemptions), r.Prompt, outs[i], r.MaxTokens)
	}
	t.Logf("preemptions %d, warm prefix tokens %d, ticks %d", stats.Preemptions, stats.WarmPrefixTokens, stats.Ticks)
}

// A conversation's next turn — the last prompt, the reply, new text — is
// admitted warm: everything but the reply's last token (sampled, never fed
// back) is cached, so only the new text is prefilled. Each turn's output
// is what the turn produces alone.
func TestSchedConversationTurnsStartWarm(t *testing.T) {
	st := newSchedStack(t, stackConfig{lanes: 2})
	ref := newRefEngine(t, tinyModel(t), 4096)
	e := st.eng.Engine
	prompt := textTokens(t, e, 300, 40)
	firstLen := len(prompt)
	for turn := range 3 {
		req := sched.Request{Prompt: prompt, Class: sched.Chat, MaxTokens: 24}
		before := st.s.Stats()
		out, res := st.run(t, req)
		after := st.s.Stats()
		if res.Err != nil || res.Finish != sched.FinishLength {
			t.Fatalf("turn %d: %+v", turn, res)
		}
		expectAlone(t, ref, fmt.Sprintf("turn %d", turn), prompt, out, req.MaxTokens)
		if turn > 0 && (res.CachedTokens != res.PromptTokens-41 || res.CachedTokens < firstLen) {
			t.Errorf("turn %d: %d of %d prompt tokens cached; want all but the last reply token and the 40 new ones", turn, res.CachedTokens, res.PromptTokens)
		}
		if got := int(after.PrefillTokens - before.PrefillTokens); got != len(prompt)-res.CachedTokens {
			t.Errorf("turn %d: prefilled %d tokens with %d of %d cached", turn, got, res.CachedTokens, len(prompt))
		}
		t.Logf("turn %d: %d prompt tokens, %d cached", turn, len(prompt), res.CachedTokens)
		// The next turn: this prompt, the reply, and the user's new text.
		prompt = joinTokens(prompt, out, textTokens(t, e, 40, uint64(41+turn)))
	}
}

// On a context too small for four lanes at once, a full KV pool is relieved
// — cached entries evicted, then a lane preempted to resume later — and
// every request still completes with the output it has alone.
func TestSchedKVFullReliefCompletesEveryRequest(t *testing.T) {
	const ctx = 512
	st := newSchedStack(t, stackConfig{lanes: 4, seqs: 8, ctx: ctx})
	ref := newRefEngine(t, tinyModel(t), ctx)
	e := st.eng.Engine
	// Something cached to evict first.
	warm := sched.Request{Prompt: textTokens(t, e, 100, 50), Class: sched.Agent, MaxTokens: 8}
	st.run(t, warm)
	// Four requests of 220 tokens each: 880 cells wanted of 512.
	var reqs []sched.Request
	for i := range 4 {
		class := []sched.Class{sched.Agent, sched.Background}[i%2]
		reqs = append(reqs, sched.Request{Prompt: textTokens(t, e, 120, uint64(51+i)), Class: class, MaxTokens: 100})
	}
	var streams []*sched.Stream
	for _, r := range reqs {
		s, err := st.s.Submit(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	for i, s := range streams {
		out, res := collectStream(t, s)
		if res.Err != nil || res.Finish != sched.FinishLength {
			t.Errorf("request %d: %+v", i, res)
			continue
		}
		expectAlone(t, ref, fmt.Sprintf("request %d (preempted %d times)", i, res.Preemptions), reqs[i].Prompt, out, reqs[i].MaxTokens)
	}
	stats := st.s.Stats()
	if stats.KVFull == 0 || stats.Preemptions == 0 || st.cache.Stats().Evictions.Load() == 0 {
		t.Errorf("the KV pool should have filled, the cache evicted and a lane given way: %+v", stats)
	}
	t.Logf("KV full %d times, preemptions %d, cache evictions %d", stats.KVFull, stats.Preemptions, st.cache.Stats().Evictions.Load())
}

// QueueWait and TTFT count from Submit, as Result documents (and as the
// TTFT histogram on /metrics reports them): a request that arrives while a
// tick runs waits for that tick's step to end, and that wait — a whole
// prompt chunk on a big model, seconds on a CPU — is the first part of its
// time to first token. The request is submitted just as a 512-token
// prefill tick starts, so it cannot be admitted before that tick returns:
// its QueueWait must cover at least the time from Submit's return to then.
func TestSchedQueueWaitCountsFromSubmit(t *testing.T) {
	st := newSchedStack(t, stackConfig{lanes: 2})
	e := st.eng.Engine
	long := sched.Request{Prompt: textTokens(t, e, 2000, 60), Class: sched.Background, MaxTokens: 4}
	fim := sched.Request{Prompt: textTokens(t, e, 20, 61), Class: sched.FIM, MaxTokens: 4}
	type arrival struct {
		s                 *sched.Stream
		submitted, ticked time.Time
	}
	arrived := make(chan arrival, 1)
	var a arrival
	hooked := -1
	st.eng.setBefore(func(i int, p *engine.Plan) {
		if len(p.Prefills) == 0 {
			return
		}
		st.eng.setBefore(nil)
		s, err := st.s.Submit(context.Background(), fim)
		if err != nil {
			t.Error(err)
			return
		}
		hooked, a = i, arrival{s: s, submitted: time.Now()}
	})
	st.eng.setAfter(func(i int, _ *tickRecord) {
		if i == hooked {
			st.eng.setAfter(nil)
			a.ticked = time.Now()
			arrived <- a
		}
	})
	ls, err := st.s.Submit(context.Background(), long)
	if err != nil {
		t.Fatal(err)
	}
	got := <-arrived
	_, res := collectStream(t, got.s)
	collectStream(t, ls)
	if wait := got.ticked.Sub(got.submitted); res.QueueWait < wait || res.TTFT < wait {
		t.Errorf("queue wait %v and TTFT %v leave out the %v the request waited for the tick in flight", res.QueueWait, res.TTFT, wait)
	}
}
