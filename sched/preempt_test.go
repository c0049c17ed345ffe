package sched

import (
	"errors"
	"strings"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

func TestPreemptionPicksADecodingLowerClassLaneFirst(t *testing.T) {
	h := newHarness(t, 2, 4096, Config{}).fast()
	bg := Request{Prompt: promptOf(1, 30000), Class: Background, MaxTokens: 5}
	agent := Request{Prompt: promptOf(2, 40), Class: Agent, MaxTokens: 400}
	h.submit("bg", bg)
	h.submit("agent", agent)
	for range 3 {
		h.step()
	}
	if l := h.loop.p.laneOf(h.jobs["agent"]); l == nil || !l.decoding() {
		t.Fatal("the agent should be decoding")
	}
	if l := h.loop.p.laneOf(h.jobs["bg"]); l == nil || l.decoding() {
		t.Fatal("the background job should still be prefilling")
	}
	chat := Request{Prompt: promptOf(3, 30), Class: Chat, MaxTokens: 10}
	h.submit("chat", chat)
	h.step()
	if h.laneOf("chat") == 0 {
		t.Fatal("the chat did not get a lane")
	}
	if h.jobs["agent"].preemptions != 1 || h.jobs["bg"].preemptions != 0 {
		t.Fatalf("preempted agent %d times, background %d: the decoding lane goes first", h.jobs["agent"].preemptions, h.jobs["bg"].preemptions)
	}
	h.run(2000)
	h.expectOutput("chat", chat)
	h.expectOutput("agent", agent)
	h.expectOutput("bg", bg)
	if r := h.result("agent"); r.Preemptions != 1 || r.Err != nil || r.Finish != FinishLength {
		t.Fatalf("agent result %+v", r)
	}
	if got := h.stats.Snapshot().Preemptions; got != 1 {
		t.Fatalf("%d preemptions counted", got)
	}
}

func TestPreemptedOutputEqualsAnUnpreemptedRun(t *testing.T) {
	h := newHarness(t, 1, 4096, Config{})
	h.eng.KeepPlans = true
	req := Request{Prompt: promptOf(7, 300), Class: Background, MaxTokens: 1000}
	h.submit("bg", req)
	chats := 0
	for range 5000 {
		if h.done("bg") {
			break
		}
		if l := h.loop.p.laneOf(h.jobs["bg"]); l != nil && l.produced > 0 && chats < 3 {
			chats++
			h.submit(string(rune('a'+chats)), Request{Prompt: promptOf(100+chats, 20), Class: Chat, MaxTokens: 5})
		}
		h.step()
	}
	h.run(1000)
	if r := h.result("bg"); r.Preemptions != 3 {
		t.Fatalf("preempted %d times, want 3", r.Preemptions)
	}
	h.expectOutput("bg", req)
	// Each resumption found its prompt in the cache: only the last token
	// sampled before the preemption needed prefilling.
	var admits []engine.Admit
	for _, p := range h.eng.Plans {
		admits = append(admits, p.Admits...)
	}
	resumed := 0
	for _, a := range admits {
		if a.PromptLen > 300 {
			resumed++
			if a.PromptLen-a.Cached != 1 {
				t.Fatalf("a resumption prefilled %d tokens cold", a.PromptLen-a.Cached)
			}
		}
	}
	if resumed != 3 {
		t.Fatalf("%d resumptions", resumed)
	}
}

func TestPreemptedMidPrefillResumesWarm(t *testing.T) {
	h := newHarness(t, 1, 4096, Config{PrefillBudget: 512}).fast()
	h.eng.KeepPlans = true
	bg := Request{Prompt: promptOf(1, 3000), Class: Background, MaxTokens: 8}
	h.submit("bg", bg)
	h.step()
	h.step()
	chat := Request{Prompt: promptOf(2, 16), Class: Chat, MaxTokens: 4}
	h.submit("chat", chat)
	h.run(500)
	h.expectOutput("bg", bg)
	h.expectOutput("chat", chat)
	var resumed *engine.Admit
	for _, p := range h.eng.Plans {
		for i, a := range p.Admits {
			if a.PromptLen == 3000 && a.Cached > 0 {
				resumed = &p.Admits[i]
			}
		}
	}
	if resumed == nil || resumed.Cached != 1024 {
		t.Fatalf("the preempted prompt did not resume from its 1024 prefilled tokens: %+v", resumed)
	}
}

func TestCancelledLaneIsGoneWithinOneStep(t *testing.T) {
	h := newHarness(t, 2, 4096, Config{}).fast()
	h.submit("a", Request{Prompt: promptOf(1, 50), Class: Chat, MaxTokens: 5000})
	h.submit("b", Request{Prompt: promptOf(2, 50), Class: Chat, MaxTokens: 5000})
	for range 4 {
		h.step()
	}
	st := h.jobs["a"].stream
	delivered := len(h.out["a"])
	h.eng.OnStep = func(int) {
		st.Cancel() // from "another goroutine", while the step runs
	}
	tag := h.laneOf("a")
	h.step()
	h.eng.OnStep = nil
	if h.eng.HasLane(tag) {
		t.Fatal("the cancelled lane is still in the engine after the step")
	}
	r := h.result("a")
	if r.Finish != FinishCancelled || r.Err != nil {
		t.Fatalf("result %+v", r)
	}
	if got := len(h.out["a"]); got != delivered {
		t.Fatalf("%d tokens delivered after the cancel", got-delivered)
	}
	h.jobs["b"].stream.Cancel()
	h.run(10)
	if h.stats.Snapshot().Cancelled != 2 {
		t.Fatalf("cancelled count %d", h.stats.Snapshot().Cancelled)
	}
	// A queued job that is cancelled never starts.
	h.submit("c", Request{Prompt: promptOf(3, 50), Class: Agent, MaxTokens: 5000})
	h.submit("d", Request{Prompt: promptOf(4, 50), Class: Agent, MaxTokens: 5000})
	h.submit("e", Request{Prompt: promptOf(5, 50), Class: Agent, MaxTokens: 5})
	h.step()
	h.jobs["e"].stream.Cancel()
	h.step()
	if r := h.result("e"); r.Finish != FinishCancelled || !errors.Is(r.Err, ErrCancelled) || h.jobs["e"].admitted {
		t.Fatalf("queued cancel: %+v", r)
	}
}

func TestExpiredJobNeverStarts(t *testing.T) {
	h := newHarness(t, 1, 4096, Config{}).fast()
	h.eng.KeepPlans = true
	h.submit("chat", Request{Prompt: promptOf(1, 50), Class: Chat, MaxTokens: 600})
	h.step()
	fim := Request{Prompt: promptOf(2, 40), Class: FIM, MaxTokens: 10, Deadline: h.clock.Now().Add(100 * time.Millisecond)}
	h.submit("fim", fim)
	h.run(1000)
	r := h.result("fim")
	if r.Finish != FinishDeadline || !errors.Is(r.Err, ErrDeadline) || r.Generated != 0 {
		t.Fatalf("fim result %+v", r)
	}
	for _, p := range h.eng.Plans {
		for _, a := range p.Admits {
			if a.PromptLen == 40 {
				t.Fatal("the expired FIM request was admitted")
			}
		}
	}
	if h.stats.Snapshot().Expired != 1 {
		t.Fatal("expiry not counted")
	}
}

func TestRunningLaneStopsAtItsDeadlineWithinAStep(t *testing.T) {
	h := newHarness(t, 2, 4096, Config{})
	deadline := h.clock.Now().Add(1500 * time.Millisecond)
	h.submit("a", Request{Prompt: promptOf(1, 20), Class: Agent, MaxTokens: 5000, Deadline: deadline})
	h.run(100)
	r := h.result("a")
	if r.Finish != FinishDeadline || r.Err != nil || r.Generated == 0 {
		t.Fatalf("result %+v", r)
	}
	// A step costs at most 30ms+10ms here: the lane ended within one.
	if over := h.jobs["a"].ended.Sub(deadline); over < 0 || over > 40*time.Millisecond {
		t.Fatalf("ended %v after its deadline", over)
	}
}

func TestStopTokenEndsTheLane(t *testing.T) {
	h := newHarness(t, 1, 4096, Config{}).fast()
	prompt := promptOf(5, 30)
	ref := enginetest.Reference(prompt, 100, 0, nil, h.eng.Descriptor().Ctx)
	stop := ref[6]
	req := Request{Prompt: prompt, Class: Chat, MaxTokens: 100, StopTokens: []engine.Token{stop}, Logprobs: 3}
	h.submit("s", req)
	h.run(100)
	h.expectOutput("s", req)
	r := h.result("s")
	if r.Finish != FinishStop {
		t.Fatalf("finish %v", r.Finish)
	}
	got := h.out["s"]
	if got[len(got)-1].Token != stop {
		t.Fatal("the stop token is delivered last")
	}
	for _, tok := range got {
		if len(tok.Top) != 3 || tok.Top[0].Token != tok.Token {
			t.Fatalf("logprobs %+v", tok)
		}
	}
}

func TestKVFullRelievesThenPreemptsThenFails(t *testing.T) {
	clock := newFakeClock()
	eng := enginetest.New(2, 4096, 8, 1<<20, clock)
	eng.KVCap = 600
	h := newHarnessOn(t, eng, clock, Config{}).fast()
	// Leave a cached entry behind to be evicted.
	warm := Request{Prompt: promptOf(9, 200), Class: Agent, MaxTokens: 4}
	h.submit("warm", warm)
	h.run(100)
	a := Request{Prompt: promptOf(1, 250), Class: Agent, MaxTokens: 80}
	b := Request{Prompt: promptOf(2, 250), Class: Background, MaxTokens: 80}
	h.submit("a", a)
	h.submit("b", b)
	h.run(2000)
	h.expectOutput("a", a)
	h.expectOutput("b", b)
	s := h.stats.Snapshot()
	if s.KVFull == 0 || s.Preemptions == 0 {
		t.Fatalf("expected the KV pool to fill and a lane to give way: %+v", s)
	}
	if h.jobs["b"].preemptions == 0 {
		t.Fatal("the background lane should have given way")
	}
	// Alone and still too big: a clear error, not a spin.
	huge := Request{Prompt: promptOf(3, 600), Class: Chat, MaxTokens: 500}
	h.submit("huge", huge)
	h.run(2000)
	r := h.result("huge")
	if r.Finish != FinishError || !errors.Is(r.Err, engine.ErrKVFull) || !strings.Contains(r.Err.Error(), "no room") {
		t.Fatalf("huge: %+v", r)
	}
}

func TestSharedPrefixHold(t *testing.T) {
	h := newHarness(t, 2, 4096, Config{}).fast()
	h.eng.KeepPlans = true
	shared := promptOf(1, 2000)
	first := Request{Prompt: shared, Class: Agent, MaxTokens: 20}
	h.submit("first", first)
	h.step() // admitted, prefilling: 20 tokens from its end
	second := Request{Prompt: append(append([]engine.Token(nil), shared...), promptOf(2, 100)...), Class: Agent, MaxTokens: 5}
	h.submit("second", second)
	h.step()
	if h.laneOf("second") != 0 {
		t.Fatal("the second request should wait for the shared prefix")
	}
	h.run(500)
	h.expectOutput("second", second)
	r := h.result("second")
	if r.CachedTokens < 2000 {
		t.Fatalf("the second request started with %d cached tokens, want the shared 2000", r.CachedTokens)
	}
	if h.stats.Snapshot().SharedPrefixHolds == 0 {
		t.Fatal("hold not counted")
	}

	// A lane far from its end is not waited for.
	h = newHarness(t, 2, 4096, Config{}).fast()
	h.submit("first", Request{Prompt: shared, Class: Agent, MaxTokens: 2000})
	h.step()
	h.submit("second", second)
	h.step()
	if h.laneOf("second") == 0 {
		t.Fatal("the second request should not wait for a lane with 2000 tokens to go")
	}
	h.run(5000)
}

func TestAcquireFailureWaitsWhileLanesRunAndFailsWhenNoneDo(t *testing.T) {
	h := newHarness(t, 2, 4096, Config{}).fast()
	h.submit("a", Request{Prompt: promptOf(1, 20), Class: Agent, MaxTokens: 3000})
	h.step()
	h.cache.acquireErr = errors.New("no sequence")
	h.submit("b", Request{Prompt: promptOf(2, 20), Class: Agent, MaxTokens: 5})
	h.step()
	h.step()
	if h.done("b") {
		t.Fatal("b failed while a lane was running")
	}
	h.cache.acquireErr = nil
	h.run(5000)
	h.expectOutput("b", Request{Prompt: promptOf(2, 20), MaxTokens: 5})
	h.cache.acquireErr = errors.New("no sequence")
	h.submit("c", Request{Prompt: promptOf(3, 20), Class: Agent, MaxTokens: 5})
	h.run(10)
	if r := h.result("c"); r.Err == nil || !strings.Contains(r.Err.Error(), "no sequence") {
		t.Fatalf("c: %+v", r)
	}
}
