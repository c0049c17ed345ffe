package sched

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"superfluid/engine/enginetest"
)

// Scheduling behaviour, end to end through the loop, the fake engine and
// the fake cache, in virtual time.

func TestEightEqualPromptsFinishOneAfterAnother(t *testing.T) {
	h := newHarness(t, 8, 8192, Config{PrefillBudget: 512}).fast()
	h.eng.KeepPlans = true
	names := make([]string, 8)
	for i := range names {
		names[i] = fmt.Sprint("p", i)
		h.submit(names[i], Request{Prompt: promptOf(i, 7680), Class: Agent, MaxTokens: 1})
	}
	finishedAt := map[string]int{}
	for range 1000 {
		busy := h.step()
		for _, n := range names {
			if _, ok := finishedAt[n]; !ok && h.done(n) {
				finishedAt[n] = len(h.prefillSteps())
			}
		}
		if !busy {
			break
		}
	}
	for i, n := range names {
		if want := 15 * (i + 1); finishedAt[n] != want {
			t.Errorf("%s finished after %d prefill ticks, want %d (fifteen each, in turn)", n, finishedAt[n], want)
		}
		h.expectOutput(n, Request{Prompt: promptOf(i, 7680), MaxTokens: 1})
	}
}

func TestLongPrefillProgressesUnderAStreamOfShortPrompts(t *testing.T) {
	const bound = 3
	h := newHarness(t, 3, 4096, Config{PrefillBudget: 512, StarvationSteps: bound}).fast()
	h.eng.KeepPlans = true
	h.submit("long", Request{Prompt: promptOf(0, 8*512), Class: Agent, MaxTokens: 1})
	short := 0
	for range 200 {
		for h.loop.p.queued() < 2 {
			short++
			h.submit(fmt.Sprint("s", short), Request{Prompt: promptOf(short, 512), Class: Agent, MaxTokens: 1})
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
	tag := uint32(1) // the first lane admitted
	for i, p := range h.prefillSteps() {
		if chunkOf(&p, tag) > 0 {
			served = append(served, i)
		}
	}
	if len(served) != 8 {
		t.Fatalf("the long lane was served in %d ticks, want 8: %v", len(served), served)
	}
	for i := 1; i < len(served); i++ {
		if served[i]-served[i-1] > bound+1 {
			t.Fatalf("the long lane waited more than %d ticks: served at %v", bound+1, served)
		}
	}
	if short < 8 {
		t.Fatalf("only %d short prompts ran beside it", short)
	}
	h.expectOutput("long", Request{Prompt: promptOf(0, 8*512), MaxTokens: 1})
}

func TestTailCapAfterAPromptCompletes(t *testing.T) {
	// Three chats fill every lane, so the tick is not an open one and takes
	// the whole fixed budget.
	for _, c := range []struct {
		prompts, want []int
	}{
		{[]int{500, 4000, 4000}, []int{500, 500, 0}},
		{[]int{40, 4000, 4000}, []int{40, 256, 0}},
		{[]int{1000, 300, 200}, []int{0, 256, 200}}, // shortest first: 200 completes, the tail is 256
		{[]int{3000, 3000}, []int{3000, 1096}},
	} {
		clock := newFakeClock()
		eng := enginetest.New(len(c.prompts), 8192, 4*len(c.prompts)+4, 1<<20, clock)
		// One micro-batch the whole batch: the first step, whose cost is
		// not yet known, is not held to one 512-token micro-batch.
		eng.Descriptor().UBatch = 8192
		h := newHarnessOn(t, eng, clock, Config{PrefillBudget: 4096}).fast()
		h.eng.KeepPlans = true
		for i, n := range c.prompts {
			h.submit(fmt.Sprint("c", i), Request{Prompt: promptOf(i, n), Class: Chat, MaxTokens: 2})
		}
		h.step()
		p := h.eng.Plans[0]
		var got []int
		for i := range c.prompts {
			got = append(got, chunkOf(&p, uint32(i+1)))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("prompts %v: first tick prefilled %v, want %v", c.prompts, got, c.want)
		}
		h.run(100)
	}
}

func TestChatCompletingItsPromptHoldsLowerClassesBack(t *testing.T) {
	h := newHarness(t, 2, 512, Config{}).fast()
	h.eng.KeepPlans = true
	h.submit("agent", Request{Prompt: promptOf(1, 6000), Class: Agent, MaxTokens: 4})
	h.step()
	h.step()
	h.submit("chat", Request{Prompt: promptOf(2, 22), Class: Chat, MaxTokens: 4})
	before := len(h.eng.Plans)
	for !h.done("chat") {
		h.step()
	}
	steps := h.eng.Plans[before:] // the chat's prompt, then its reply
	chat, agent := uint32(2), uint32(1)
	if chunkOf(&steps[0], chat) != 22 {
		t.Fatalf("the chat's prompt did not complete in its first step: %+v", steps[0].Prefills)
	}
	for i := range steps {
		if n := chunkOf(&steps[i], agent); n != 0 {
			t.Fatalf("step %d: the agent prefilled %d tokens beside the chat's prompt or short reply", i, n)
		}
	}
	before = len(h.eng.Plans)
	h.step()
	if p := h.eng.Plans[before:]; len(p) == 0 || chunkOf(&p[0], agent) == 0 {
		t.Fatalf("the agent did not resume prefill the step after the reply: %+v", p)
	}
	h.run(5000)
	h.expectOutput("chat", Request{Prompt: promptOf(2, 22), MaxTokens: 4})
	h.expectOutput("agent", Request{Prompt: promptOf(1, 6000), MaxTokens: 4})
}

func TestClassCapsBindAndAgingAdmitsBackgroundWork(t *testing.T) {
	h := newHarness(t, 4, 4096, Config{ClassLanes: ClassLanes{Background: 1}}).fast()
	for i := range 4 {
		h.submit(fmt.Sprint("b", i), Request{Prompt: promptOf(i, 50), Class: Background, MaxTokens: 20})
	}
	for range 500 {
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
	for i := range 4 {
		h.expectOutput(fmt.Sprint("b", i), Request{Prompt: promptOf(i, 50), MaxTokens: 20})
	}

	// One lane, a steady stream of agent work, one background job queued
	// behind it: aging admits the background job before the agents run dry.
	const period = 8 // steps: an agent's job takes about four
	h = newHarness(t, 1, 4096, Config{StarvationSteps: period}).fast()
	h.submit("a0", Request{Prompt: promptOf(0, 30), Class: Agent, MaxTokens: 3})
	h.submit("bg", Request{Prompt: promptOf(99, 30), Class: Background, MaxTokens: 3})
	agents := 0
	for range 200 {
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
	if r := h.result("bg"); r.QueueWait <= 0 {
		t.Fatalf("the background job did not wait: %+v", r)
	}
	h.expectOutput("bg", Request{Prompt: promptOf(99, 30), MaxTokens: 3})
}

func TestParseClassLanes(t *testing.T) {
	for _, c := range []struct {
		spec string
		want ClassLanes
	}{
		{"", ClassLanes{}},
		{"background=2, agent=6", ClassLanes{0, 0, 6, 2}},
		{"interactive=8", ClassLanes{8, 0, 0, 0}},
		{"fim=1,chat=2", ClassLanes{2, 1, 0, 0}},
	} {
		got, err := ParseClassLanes(c.spec, 8)
		if err != nil || got != c.want {
			t.Errorf("ParseClassLanes(%q) = %v, %v; want %v", c.spec, got, err, c.want)
		}
	}
	for spec, msg := range map[string]string{
		"background":           "class=N",
		"urgent=1":             "unknown class",
		"agent=-1":             "whole number",
		"agent=x":              "whole number",
		"agent=9":              "exceeds",
		"background=0":         "at least 1",
		"agent=1,foreground=2": "twice",
	} {
		_, err := ParseClassLanes(spec, 8)
		if err == nil || !contains(err.Error(), msg) || !contains(err.Error(), "sched: ") {
			t.Errorf("ParseClassLanes(%q) = %v, want an error saying %q", spec, err, msg)
		}
	}
	if caps, _ := ParseClassLanes("background=2,agent=6", 8); caps.String() != "agent=6,background=2" {
		t.Errorf("String = %q", caps.String())
	}
	for _, n := range []string{"chat", "FIM", " Interactive-Chat ", "foreground_agent", "3"} {
		if _, err := ParseClass(n); err != nil {
			t.Errorf("ParseClass(%q): %v", n, err)
		}
	}
	if _, err := ParseClass("4"); err == nil {
		t.Error("ParseClass(4) should fail")
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestBackgroundDecodingIsThrottled(t *testing.T) {
	h := newHarness(t, 2, 4096, Config{BackgroundDivisor: 3, StarvationSteps: 2}).fast()
	h.eng.KeepPlans = true
	h.submit("chat", Request{Prompt: promptOf(1, 20), Class: Chat, MaxTokens: 1 << 30})
	h.submit("bg", Request{Prompt: promptOf(2, 20), Class: Background, MaxTokens: 1 << 30})
	for range 30 {
		h.step()
	}
	chatTicks, bgTicks := 0, 0
	for _, p := range h.eng.Plans[1:] {
		if decodesIn(&p, 1) {
			chatTicks++
		}
		if decodesIn(&p, 2) {
			bgTicks++
		}
	}
	if chatTicks < 25 || bgTicks > chatTicks/3+1 || bgTicks < chatTicks/3-1 {
		t.Fatalf("chat decoded in %d ticks, background in %d: want one in three", chatTicks, bgTicks)
	}
	if h.stats.Snapshot().StarvationGrants == 0 {
		t.Fatal("grants to the throttled lane after it starved should count")
	}
	h.jobs["chat"].stream.Cancel()
	h.jobs["bg"].stream.Cancel()
	h.run(10)
}

// A short reply someone is reading holds Agent and Background prefill back
// until it is done; a long one shares the ticks with them.
func TestShortInteractiveReplyHoldsBackgroundPrefillBack(t *testing.T) {
	for _, c := range []struct {
		name      string
		maxTokens int
		held      bool
	}{{"short", 40, true}, {"long", 100000, false}} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 2, 4096, Config{}).fast()
			h.eng.KeepPlans = true
			h.submit("bg", Request{Prompt: promptOf(1, 60000), Class: Background, MaxTokens: 4})
			h.step()
			h.step()
			h.submit("fim", Request{Prompt: promptOf(2, 30), Class: FIM, MaxTokens: c.maxTokens})
			fim, bg := uint32(2), uint32(1)
			sawDecode, bgBeside := false, false
			for range 200 {
				before := len(h.eng.Plans)
				h.step()
				for i := range h.eng.Plans[before:] {
					p := &h.eng.Plans[before+i]
					decodes := false
					for _, d := range p.Decodes {
						decodes = decodes || d.Lane == fim
					}
					sawDecode = sawDecode || decodes
					bgBeside = bgBeside || decodes && chunkOf(p, bg) > 0
				}
				if h.done("fim") {
					break
				}
			}
			if !sawDecode {
				t.Fatal("the FIM reply never decoded")
			}
			if bgBeside == c.held {
				t.Fatalf("background prefilled beside the FIM reply's decoding: %v, want %v", bgBeside, !c.held)
			}
			if c.held {
				if !h.done("fim") {
					t.Fatal("the short reply did not finish")
				}
				before := len(h.eng.Plans)
				h.step()
				h.step()
				resumed := false
				for i := range h.eng.Plans[before:] {
					resumed = resumed || chunkOf(&h.eng.Plans[before+i], bg) > 0
				}
				if !resumed {
					t.Fatal("background prefill did not resume after the reply")
				}
			}
		})
	}
}

// Short replies one after another (an editor completing as someone types)
// do not starve background prefill: a long run of holds lets a tick through.
func TestBackToBackShortRepliesDoNotStarveBackgroundPrefill(t *testing.T) {
	h := newHarness(t, 3, 4096, Config{})
	h.eng.KeepPlans = true
	h.submit("bg", Request{Prompt: promptOf(1, 200000), Class: Background, MaxTokens: 4})
	h.step()
	h.step()
	bg := h.laneOf("bg")
	n, lastFIM := 0, ""
	var progress []time.Duration // virtual times at which bg prefilled
	start := h.clock.since()
	var active []string
	for range 400 {
		// Two replies overlap at all times: one starts before the other ends.
		active = slices.DeleteFunc(active, h.done)
		for len(active) < 2 {
			n++
			lastFIM = fmt.Sprintf("fim%d", n)
			h.submit(lastFIM, Request{Prompt: promptOf(100+n, 20), Class: FIM, MaxTokens: 24 + n%7})
			active = append(active, lastFIM)
		}
		before := len(h.eng.Plans)
		h.step()
		for i := range h.eng.Plans[before:] {
			if chunkOf(&h.eng.Plans[before+i], bg) > 0 {
				progress = append(progress, h.clock.since())
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d FIM requests ran", n)
	}
	// Across the run, background prefill never waits much longer than the
	// hold bound.
	last := start
	for _, at := range append(progress, h.clock.since()) {
		if gap := at - last; gap.Seconds() > 2*maxShortReplyHoldSecs {
			t.Fatalf("background prefill waited %v (FIM requests: %d; prefill at %v)", gap, n, progress)
		}
		last = at
	}
}
