package sched

import (
	"fmt"
	"testing"
)

// The seeds' prefill-order tests, on the pure functions.

func TestRankServesPromptsThatArrivedTogetherOneAfterAnother(t *testing.T) {
	// Eight equal prompts, one tick's budget each time: the shortest left
	// goes first and nobody is passed over by a younger lane, so they
	// finish in order instead of in turns.
	const bound = 8
	type l struct {
		tag           uint32
		left, starved int
	}
	lanes := make([]l, 8)
	for i := range lanes {
		lanes[i] = l{tag: uint32(i), left: 7680}
	}
	var finished []int
	for tick := 0; tick < 400; tick++ {
		served := -1
		for i := range lanes {
			if lanes[i].left == 0 {
				continue
			}
			if served < 0 || rankOf(Agent, lanes[i].left, lanes[i].tag, lanes[i].starved, bound).
				before(rankOf(Agent, lanes[served].left, lanes[served].tag, lanes[served].starved, bound)) {
				served = i
			}
		}
		if served < 0 {
			break
		}
		lanes[served].left -= 512
		lanes[served].starved = 0
		if lanes[served].left == 0 {
			finished = append(finished, tick+1)
		}
		for i := range lanes {
			lanes[i].starved = starvedAfter(lanes[i].starved, i != served && lanes[i].left > 0, lanes[served].tag, true, lanes[i].tag)
		}
	}
	want := []int{15, 30, 45, 60, 75, 90, 105, 120}
	if fmt.Sprint(finished) != fmt.Sprint(want) {
		t.Fatalf("finished at ticks %v, want %v: fifteen ticks each, in turn", finished, want)
	}
}

func TestRankOrder(t *testing.T) {
	const bound = 3
	if !rankOf(Chat, 512, 9, 0, bound).before(rankOf(Chat, 8*512, 0, 0, bound)) {
		t.Error("a shorter remaining prompt goes first")
	}
	if !rankOf(Background, 8*512, 0, bound, bound).before(rankOf(Chat, 1, 9, 0, bound)) {
		t.Error("a starving lane goes before any class")
	}
	if rankOf(Background, 0, 0, bound, bound).before(rankOf(Chat, 1, 9, 0, bound)) {
		t.Error("a lane with nothing left to prefill is never starving")
	}
	if !rankOf(Chat, 4000, 5, 0, bound).before(rankOf(Agent, 10, 1, 0, bound)) {
		t.Error("a better class goes before a shorter prompt")
	}
}

func TestJoinWaitBoundsAStepAtAboutHalfASecond(t *testing.T) {
	cases := []struct {
		spt  float64
		want int
		why  string
	}{
		{1.0 / 1200, 592, "600 tokens round down to whole 16-token steps"},
		{1.0 / 5000, 2496, "a fast model: what fits half a second (the batch caps it)"},
		{1.0, 64, "never below the CPU's batch"},
		{1.0 / 330, 160, "a 27B: 165 tokens round down"},
	}
	for _, c := range cases {
		flat := rowCost{w: 1, a: c.spt}
		if got := joinWaitTokens(&flat, 0, 0); got != c.want {
			t.Errorf("joinWaitTokens(%g) = %d, want %d: %s", c.spt, got, c.want, c.why)
		}
		if got := joinWaitTokens(&flat, 5000, 0); got != c.want {
			t.Errorf("a flat rate at depth 5000: joinWaitTokens(%g) = %d, want %d", c.spt, got, c.want)
		}
	}
	if got := joinWaitTokens(&rowCost{}, 0, 0); got < 1<<30 {
		t.Errorf("an unknown rate bounds nothing: got %d", got)
	}
	deep := rowCost{w: 1, a: 1.0 / 5000, b: 2e-7}
	if got := joinWaitTokens(&deep, 8000, 0); got != 272 {
		// 0.2 ms + 1.6 ms a token at depth 8000: 273 tokens fit.
		t.Errorf("deep in a prompt: joinWaitTokens = %d, want 272", got)
	}
	if got := joinWaitTokens(&deep, 0, 0.6); got != joinWaitMinTokens {
		t.Errorf("decoding rows over the budget leave one minimal step: got %d", got)
	}
}

func grants(budget int, remaining []int) []int {
	b := newPrefillBudget(budget, 1<<20)
	out := make([]int, len(remaining))
	for i, r := range remaining {
		c := b.offer(r)
		if c > 0 {
			b.take(c, c == r, Background)
		}
		out[i] = c
	}
	return out
}

func TestTailAfterFirstCompletionIsCappedInAggregate(t *testing.T) {
	for _, c := range []struct {
		budget          int
		remaining, want []int
	}{
		{4096, []int{500, 4000, 4000, 4000, 4000, 4000, 4000, 4000}, []int{500, 500, 0, 0, 0, 0, 0, 0}},
		{4096, []int{40, 4000, 4000}, []int{40, 256, 0}},
		{4096, []int{1000, 300, 200, 4000}, []int{1000, 300, 200, 500}},
		{4096, []int{3000, 3000}, []int{3000, 1096}},
	} {
		if got := grants(c.budget, c.remaining); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("grants(%d, %v) = %v, want %v", c.budget, c.remaining, got, c.want)
		}
	}
}

func TestNothingOfALowerClassPrefillsBesideAChatThatFinishesItsPrompt(t *testing.T) {
	b := newPrefillBudget(4096, 1<<20)
	if got := b.offerTo(22, Chat); got != 22 {
		t.Fatalf("chat offered %d", got)
	}
	b.take(22, true, Background)
	b.holdBelow(Chat)
	if got := b.offerTo(4000, Background); got != 0 {
		t.Errorf("a background lane got %d beside a completing chat; it waits a tick", got)
	}
	if got := b.offerTo(100, Chat); got != 100 {
		t.Errorf("another chat got %d; it does not wait", got)
	}
	b = newPrefillBudget(4096, 1<<20)
	b.take(500, false, Background)
	if got := b.offerTo(4000, Background); got != 3596 {
		t.Errorf("a chat still prefilling holds nothing back: got %d", got)
	}
}

func TestRankKeepsALongPrefillProgressingUnderShortPrompts(t *testing.T) {
	const budget, bound = 512, 3
	type l struct {
		tag           uint32
		left, starved int
	}
	lanes := []l{{0, 8 * budget, 0}}
	next := uint32(1)
	var longTicks []int
	for tick := 0; tick < 64; tick++ {
		kept := lanes[:0]
		for _, x := range lanes {
			if x.tag == 0 || x.left > 0 {
				kept = append(kept, x)
			}
		}
		lanes = kept
		for len(lanes) < 3 {
			lanes = append(lanes, l{next, budget, 0})
			next++
		}
		order := make([]int, len(lanes))
		for i := range order {
			order[i] = i
		}
		for i := 1; i < len(order); i++ {
			for k := i; k > 0; k-- {
				a, b := lanes[order[k]], lanes[order[k-1]]
				if !rankOf(Chat, a.left, a.tag, a.starved, bound).before(rankOf(Chat, b.left, b.tag, b.starved, bound)) {
					break
				}
				order[k], order[k-1] = order[k-1], order[k]
			}
		}
		pb := newPrefillBudget(budget, 1<<20)
		served := map[uint32]bool{}
		var youngest uint32
		for _, i := range order {
			x := &lanes[i]
			if x.left == 0 {
				continue
			}
			chunk := pb.offer(x.left)
			x.left -= chunk
			if chunk > 0 {
				x.starved = 0
				served[x.tag] = true
				youngest = max(youngest, x.tag)
				pb.take(chunk, x.left == 0, Background)
				if x.tag == 0 {
					longTicks = append(longTicks, tick)
				}
			}
		}
		for i := range lanes {
			x := &lanes[i]
			x.starved = starvedAfter(x.starved, x.left > 0 && !served[x.tag], youngest, len(served) > 0, x.tag)
		}
		if lanes[0].starved > bound {
			t.Fatalf("tick %d: the long lane waited past the bound", tick)
		}
		if lanes[0].left == 0 {
			break
		}
	}
	if lanes[0].left != 0 {
		t.Fatalf("the long prompt did not finish prefilling: %v", longTicks)
	}
	for i := 1; i < len(longTicks); i++ {
		if longTicks[i]-longTicks[i-1] > bound+1 {
			t.Fatalf("gap past the bound: %v", longTicks)
		}
	}
}
