package sched

import (
	"fmt"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// Each behaviour of the scheduler's list (doc.go), in virtual time at a
// batch of 64 and the CPU's default of 2048 (micro-batch 512) on the CPU's
// step times, and a GPU's 512 on its own.

// gpuCost is a GPU's step: a 512-token prefill step in about 120ms.
var gpuCost = enginetest.CostModel{Step: 20 * time.Millisecond, PrefillToken: 200 * time.Microsecond, DecodeRow: 500 * time.Microsecond}

func atBatches(t *testing.T, f func(t *testing.T, batch int, cost enginetest.CostModel)) {
	for _, c := range []struct {
		batch int
		cost  enginetest.CostModel
	}{{64, enginetest.CPUCost}, {512, gpuCost}, {2048, enginetest.CPUCost}} {
		t.Run(fmt.Sprint("batch=", c.batch), func(t *testing.T) { f(t, c.batch, c.cost) })
	}
}

func newBatchHarness(t *testing.T, lanes, batch int, cost enginetest.CostModel, cfg Config) *harness {
	h := newHarness(t, lanes, batch, cfg)
	h.eng.Cost = cost
	h.eng.KeepPlans = true
	h.classes = map[uint32]Class{}
	h.loop.eng = &classRecorder{Fake: h.eng, h: h}
	return h
}

// classRecorder notes the class of each lane as its admission runs.
type classRecorder struct {
	*enginetest.Fake
	h *harness
}

func (r *classRecorder) Tick(p *engine.Plan) (*engine.Events, error) {
	for _, a := range p.Admits {
		prompt := p.Tokens[a.PromptOff : a.PromptOff+a.PromptLen]
		for _, j := range r.h.jobs {
			if equalTokens(j.prompt, prompt) {
				r.h.classes[a.Lane] = j.class
			}
		}
	}
	return r.Fake.Tick(p)
}

// prefillOf sums a plan's prompt tokens for lanes of the classes match
// selects.
func (h *harness) prefillOf(p *engine.Plan, match func(Class) bool) int {
	n := 0
	for _, f := range p.Prefills {
		if c, ok := h.classes[f.Lane]; ok && match(c) {
			n += int(f.Count)
		}
	}
	return n
}

func TestPerStepClassCapsAndAging(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		h := newBatchHarness(t, 4, batch, cost, Config{ClassLanes: ClassLanes{Background: 1}})
		for i := range 3 {
			h.submit(fmt.Sprint("b", i), Request{Prompt: promptOf(i, 100), Class: Background, MaxTokens: 8})
		}
		for range 2000 {
			n := 0
			for _, l := range h.loop.p.lanes {
				if !l.finishing && l.job.class == Background {
					n++
				}
			}
			if n > 1 {
				t.Fatalf("%d background lanes under a cap of 1", n)
			}
			if !h.step() {
				break
			}
		}
		for i := range 3 {
			h.expectOutput(fmt.Sprint("b", i), Request{Prompt: promptOf(i, 100), MaxTokens: 8})
		}
		// One lane kept busy by agents: aging admits the background job.
		h = newBatchHarness(t, 1, batch, cost, Config{StarvationSteps: 8})
		h.submit("bg", Request{Prompt: promptOf(99, 30), Class: Background, MaxTokens: 3})
		agents := 0
		for range 500 {
			for len(h.loop.p.queues[Agent]) < 2 {
				agents++
				h.submit(fmt.Sprint("a", agents), Request{Prompt: promptOf(agents, 30), Class: Agent, MaxTokens: 3})
			}
			h.step()
			if h.done("bg") {
				break
			}
		}
		if !h.done("bg") {
			t.Fatal("the background job never ran behind the agents")
		}
		h.expectOutput("bg", Request{Prompt: promptOf(99, 30), MaxTokens: 3})
	})
}

// A step's prompt tokens fit the batch beside its decoding lanes; while a
// newcomer could join, they are what fits half a second at the learned
// rate (CPU step times make that bind at 512 and 2048: 64 tokens); a lone
// lane on a one-lane scheduler takes the solo budget.
func TestPerStepPrefillFitsTheBatchAndTheJoinWait(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, _ enginetest.CostModel) {
		h := newBatchHarness(t, 4, batch, enginetest.CPUCost, Config{})
		h.submit("long", Request{Prompt: promptOf(1, 5000), Class: Background, MaxTokens: 2})
		h.submit("agent", Request{Prompt: promptOf(2, 20), Class: Agent, MaxTokens: 200})
		for range 40 {
			h.step()
		}
		cost := h.loop.p.prefillCost
		if !cost.known() {
			t.Fatal("no prefill rate learned")
		}
		for i, p := range h.eng.Plans {
			n := h.prefillOf(&p, func(Class) bool { return true })
			if n+len(p.Decodes) > batch {
				t.Fatalf("step %d carries %d prompt tokens and %d decodes in a batch of %d", i, n, len(p.Decodes), batch)
			}
			if i > 0 && n > joinWaitTokens(&cost, 0, 0) {
				t.Fatalf("step %d prefilled %d tokens with lanes free; half a second is %d", i, n, joinWaitTokens(&cost, 0, 0))
			}
		}
		// Alone, whole micro-batches within soloWaitSecs, at least one: at
		// CPU step times two seconds are under one 512-token micro-batch.
		h = newBatchHarness(t, 1, batch, enginetest.CPUCost, Config{})
		h.submit("alone", Request{Prompt: promptOf(3, 3*batch), Class: Agent, MaxTokens: 2})
		h.run(100)
		for i, p := range h.prefillSteps() {
			if n := h.prefillOf(&p, func(Class) bool { return true }); n != min(batch, 512) {
				t.Fatalf("lone prefill step %d carried %d tokens, want one micro-batch of %d", i, n, min(batch, 512))
			}
		}
	})
}

// Prompts that arrive together finish one after another (shortest
// remaining, then oldest); a long prompt under a stream of short ones is
// served at least every StarvationSteps+1 prefill steps.
func TestPerStepShortestFirstAndStarvedFirst(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		h := newBatchHarness(t, 3, batch, cost, Config{})
		for i := range 3 {
			h.submit(fmt.Sprint("p", i), Request{Prompt: promptOf(i, 4*batch), Class: Agent, MaxTokens: 1})
		}
		finished := map[string]int{}
		for range 1000 {
			busy := h.step()
			for i := range 3 {
				n := fmt.Sprint("p", i)
				if _, ok := finished[n]; !ok && h.done(n) {
					finished[n] = len(h.prefillSteps())
				}
			}
			if !busy {
				break
			}
		}
		if !(finished["p0"] < finished["p1"] && finished["p1"] < finished["p2"]) {
			t.Errorf("finished after %v prefill steps: want p0, p1, p2 in turn", finished)
		}
		for i := range 3 {
			// Where a step is the whole batch (what fits half a second at
			// CPU step times is 64 tokens), each takes four.
			if want := 4 * (i + 1); batch <= 512 && finished[fmt.Sprint("p", i)] != want {
				t.Errorf("p%d finished after %d prefill steps, want %d", i, finished[fmt.Sprint("p", i)], want)
			}
		}
		const bound = 3
		h = newBatchHarness(t, 3, batch, cost, Config{StarvationSteps: bound})
		h.submit("long", Request{Prompt: promptOf(0, 8*batch), Class: Agent, MaxTokens: 1})
		short := 0
		for range 2000 {
			for h.loop.p.queued() < 2 {
				short++
				h.submit(fmt.Sprint("s", short), Request{Prompt: promptOf(short, batch), Class: Agent, MaxTokens: 1})
			}
			h.step()
			if h.done("long") {
				break
			}
		}
		if !h.done("long") {
			t.Fatal("the long prompt never finished")
		}
		var served []int
		for i, p := range h.prefillSteps() {
			if chunkOf(&p, 1) > 0 {
				served = append(served, i)
			}
		}
		for i := 1; i < len(served); i++ {
			if served[i]-served[i-1] > bound+1 {
				t.Fatalf("the long lane waited more than %d prefill steps: %v", bound+1, served)
			}
		}
		h.expectOutput("long", Request{Prompt: promptOf(0, 8*batch), MaxTokens: 1})
	})
}

// Once a prompt completes in a step, the chunks after it take at most that
// chunk's size (at least prefillTailFloor).
func TestPerStepTailCap(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		h := newBatchHarness(t, 4, batch, cost, Config{})
		for i, n := range []int{40, 3 * batch, 3 * batch, 3 * batch} {
			h.submit(fmt.Sprint("p", i), Request{Prompt: promptOf(i, n), Class: Agent, MaxTokens: 2})
		}
		h.run(1000)
		capped := false
		for _, p := range h.eng.Plans {
			tail, limit := 0, -1
			for _, f := range p.Prefills {
				if limit >= 0 {
					tail += int(f.Count)
				}
				l := h.loop.p.find(f.Lane)
				if limit < 0 && (l == nil || int(f.Offset+f.Count) == promptLenOf(h, &p, f.Lane)) {
					limit = max(int(f.Count), prefillTailFloor)
				}
			}
			if limit >= 0 && tail > limit {
				t.Fatalf("%d tokens prefilled after a completing chunk; the cap is %d: %+v", tail, limit, p.Prefills)
			}
			capped = capped || limit >= 0 && tail == limit
		}
		if batch > prefillTailFloor && !capped {
			t.Fatal("the tail cap never bound at a batch above its floor")
		}
	})
}

// promptLenOf is the prompt length of lane tag, from the plans' admits.
func promptLenOf(h *harness, _ *engine.Plan, tag uint32) int {
	for _, p := range h.eng.Plans {
		for _, a := range p.Admits {
			if a.Lane == tag {
				return int(a.PromptLen)
			}
		}
	}
	return -1
}

// Beside a Chat or FIM prompt nothing of a worse class prefills, but
// starving lanes' quarter of the step.
func TestPerStepNothingWorseBesideAnInteractivePrompt(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		h := newBatchHarness(t, 6, batch, cost, Config{StarvationSteps: 4})
		for i := range 4 {
			h.submit(fmt.Sprint("bg", i), Request{Prompt: promptOf(i, 20*batch), Class: Background, MaxTokens: 2})
		}
		h.step()
		h.submit("fim", Request{Prompt: promptOf(9, 12*batch), Class: FIM, MaxTokens: 4})
		for range 200 {
			h.step()
			if h.done("fim") {
				break
			}
		}
		besides := 0
		for _, p := range h.eng.Plans {
			if h.prefillOf(&p, Class.interactive) == 0 {
				continue
			}
			besides++
			worse := h.prefillOf(&p, func(c Class) bool { return !c.interactive() })
			if worse > max(1, batch/starvedShareDivisor) {
				t.Fatalf("%d background tokens beside the FIM prompt; starving lanes share %d", worse, batch/starvedShareDivisor)
			}
		}
		if besides < 12 {
			t.Fatalf("the FIM prompt prefilled in %d steps", besides)
		}
		h.expectOutput("fim", Request{Prompt: promptOf(9, 12*batch), MaxTokens: 4})
	})
}

// A newcomer waits at most the step in flight: the next step planned
// admits a FIM request and prefills its prompt, whatever was owed.
func TestPerStepNewcomerWaitsOneStep(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		h := newBatchHarness(t, 4, batch, cost, Config{})
		h.submit("bg", Request{Prompt: promptOf(1, 40*batch), Class: Background, MaxTokens: 2})
		h.submit("agent", Request{Prompt: promptOf(2, 20), Class: Agent, MaxTokens: 500})
		for i := range 30 {
			for range 1 + i%3 {
				h.step()
			}
			name := fmt.Sprint("fim", i)
			before := len(h.eng.Plans)
			h.submit(name, Request{Prompt: promptOf(10+i, 30), Class: FIM, MaxTokens: 2})
			h.step()
			p := &h.eng.Plans[before]
			if len(p.Admits) != 1 || len(p.Prefills) == 0 || p.Prefills[0].Lane != p.Admits[0].Lane {
				t.Fatalf("%s: the step after its arrival did not admit and prefill it: %+v", name, p.Prefills)
			}
			for !h.done(name) {
				h.step()
			}
		}
	})
}

// Decode is owed a share of each prefill step's measured time: a quarter
// beside an agent's reply, twice it beside a chat's (a long one, so the
// short-reply hold is not what runs).
func TestPerStepDecodeShare(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		for _, c := range []struct {
			class  Class
			share  float64
			lo, hi float64
		}{{Agent, decodeShareBesidePrefill, 0.15, 0.45}, {Chat, decodeShareBesidePrefillInteractive, 1.6, 2.6}} {
			h := newBatchHarness(t, 2, batch, cost, Config{})
			h.submit("bg", Request{Prompt: promptOf(1, 400*batch), Class: Background, MaxTokens: 2})
			h.submit("reply", Request{Prompt: promptOf(2, 20), Class: c.class, MaxTokens: 1 << 20})
			// Past the first steps, and the decode owed to the first
			// prefill step (one micro-batch, before the cost is learnt).
			for i := 0; i < 20 || h.loop.p.decodeOwed > 0; i++ {
				if i == 10000 {
					t.Fatal("decode owed never paid")
				}
				h.step()
			}
			var prefillSecs, decodeSecs float64
			for range 300 {
				before := h.clock.Now()
				n := len(h.eng.Plans)
				h.step()
				d := h.clock.Now().Sub(before).Seconds()
				if len(h.eng.Plans[n].Prefills) > 0 {
					prefillSecs += d
				} else {
					decodeSecs += d
				}
			}
			if prefillSecs == 0 {
				t.Fatalf("%s: no prefill beside the reply", c.class)
			}
			r := decodeSecs / prefillSecs
			t.Logf("%s: decode-only %.2fs against prefill %.2fs: %.2f (owed %.2f, paid in whole steps)", c.class, decodeSecs, prefillSecs, r, c.share)
			if r < c.lo || r > c.hi {
				t.Errorf("%s: decode-only time %.2fs against prefill %.2fs: %.2f, want about %.2f", c.class, decodeSecs, prefillSecs, r, c.share)
			}
			h.jobs["reply"].stream.Cancel()
			h.jobs["bg"].stream.Cancel()
			h.run(10)
		}
	})
}

// BackgroundDivisor 3: a background lane decodes in one step of three.
func TestPerStepBackgroundThrottling(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		h := newBatchHarness(t, 2, batch, cost, Config{BackgroundDivisor: 3})
		h.submit("agent", Request{Prompt: promptOf(1, 20), Class: Chat, MaxTokens: 1 << 20})
		h.submit("bg", Request{Prompt: promptOf(2, 20), Class: Background, MaxTokens: 1 << 20})
		for range 100 {
			h.step()
		}
		chat, bg := 0, 0
		for _, p := range h.eng.Plans[10:] {
			if decodesIn(&p, 1) {
				chat++
			}
			if decodesIn(&p, 2) {
				bg++
			}
		}
		if chat < 85 || bg < chat/3-1 || bg > chat/3+1 {
			t.Fatalf("the chat decoded in %d steps, background in %d: want one in three", chat, bg)
		}
		h.jobs["agent"].stream.Cancel()
		h.jobs["bg"].stream.Cancel()
		h.run(10)
	})
}

// A Chat request with every lane busy preempts the background lane, which
// resumes warm and produces exactly what it would have alone.
func TestPerStepPreemptionResumesExactly(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		h := newBatchHarness(t, 2, batch, cost, Config{})
		agent := Request{Prompt: promptOf(1, 30), Class: Agent, MaxTokens: 80}
		bg := Request{Prompt: promptOf(2, 30), Class: Background, MaxTokens: 60}
		h.submit("agent", agent)
		h.submit("bg", bg)
		for range 10 {
			h.step()
		}
		chat := Request{Prompt: promptOf(3, 2*batch), Class: Chat, MaxTokens: 6}
		h.submit("chat", chat)
		h.run(2000)
		for name, req := range map[string]Request{"agent": agent, "bg": bg, "chat": chat} {
			h.expectOutput(name, req)
		}
		if r := h.result("bg"); r.Preemptions != 1 {
			t.Fatalf("background result %+v", r)
		}
		for _, p := range h.eng.Plans {
			for _, a := range p.Admits {
				if a.PromptLen > 30 && a.PromptLen < uint32(2*batch) && a.PromptLen-a.Cached != 1 {
					t.Fatalf("the resumption prefilled %d tokens cold", a.PromptLen-a.Cached)
				}
			}
		}
	})
}

// A cancel during a step, and a deadline passing during one, end the lane
// when the next step is planned: it retires then, and nothing sampled
// after the cancel reaches the client.
func TestPerStepCancelAndDeadlineAtTheNextStep(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		h := newBatchHarness(t, 3, batch, cost, Config{})
		h.submit("a", Request{Prompt: promptOf(1, 50), Class: Chat, MaxTokens: 5000})
		h.submit("b", Request{Prompt: promptOf(2, 50), Class: Agent, MaxTokens: 5000})
		for range 6 {
			h.step()
		}
		delivered := len(h.out["a"])
		tag := h.laneOf("a")
		h.eng.OnStep = func(int) { h.jobs["a"].stream.Cancel() }
		h.step()
		h.eng.OnStep = nil
		if h.eng.HasLane(tag) {
			t.Fatal("the cancelled lane is in the engine after the step")
		}
		if r := h.result("a"); r.Finish != FinishCancelled || len(h.out["a"]) != delivered {
			t.Fatalf("cancelled: %+v, %d tokens after the cancel", r, len(h.out["a"])-delivered)
		}
		start := h.clock.Now()
		h.submit("d", Request{Prompt: promptOf(3, 20), Class: Chat, MaxTokens: 5000, Deadline: start.Add(time.Second)})
		for !h.done("d") {
			h.step()
		}
		r := h.result("d")
		if r.Finish != FinishDeadline {
			t.Fatalf("deadline: %+v", r)
		}
		// It ended at the first step planned at or after the deadline.
		if late := h.jobs["d"].ended.Sub(start.Add(time.Second)); late < 0 || late > time.Second/2 {
			t.Fatalf("the deadline's lane ended %v after it", late)
		}
		h.jobs["b"].stream.Cancel()
		h.run(10)
	})
}

// A queued agent request sharing 2000 tokens with a lane about to end
// waits for them to be published, then starts warm.
func TestPerStepSharedPrefixHold(t *testing.T) {
	atBatches(t, func(t *testing.T, batch int, cost enginetest.CostModel) {
		h := newBatchHarness(t, 2, batch, cost, Config{})
		shared := promptOf(1, 2000)
		h.submit("first", Request{Prompt: shared, Class: Agent, MaxTokens: 16})
		h.step()
		second := Request{Prompt: append(append([]engine.Token(nil), shared...), promptOf(2, 100)...), Class: Agent, MaxTokens: 5}
		h.submit("second", second)
		h.run(5000)
		if r := h.result("second"); r.CachedTokens != 2000 {
			t.Fatalf("the second request started with %d cached tokens, want 2000", r.CachedTokens)
		}
		h.expectOutput("second", second)
	})
}
