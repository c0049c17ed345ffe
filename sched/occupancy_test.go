package sched

import (
	"testing"
)

// The board shows a running lane with its request's progress and the
// queue behind it, then nothing once both ended.
func TestOccupancyShowsLanesAndQueues(t *testing.T) {
	h := newHarness(t, 1, 64, Config{}).fast()
	h.submit("a", Request{Prompt: promptOf(1, 40), Class: Background, MaxTokens: 6})
	h.submit("b", Request{Prompt: promptOf(2, 20), Class: Background, MaxTokens: 2})
	occ := h.occupancy()
	if len(occ.Lanes) != 0 || occ.Queues[Background].Waiting != 2 || occ.Queues[Background].Oldest.IsZero() {
		t.Fatalf("before a step: %+v", occ)
	}
	for range 20 {
		h.step()
		if occ = h.occupancy(); len(occ.Lanes) == 1 && occ.Lanes[0].Decoding() && occ.Lanes[0].Generated > 0 {
			break
		}
	}
	if len(occ.Lanes) != 1 {
		t.Fatalf("one lane runs a, got %+v", occ.Lanes)
	}
	l := occ.Lanes[0]
	if l.ID != h.jobs["a"].id || l.Class != Background || l.PromptTokens != 40 || l.Prefilled != 40 || !l.Decoding() || l.Generated == 0 || l.Admitted.IsZero() || l.FirstToken.IsZero() {
		t.Fatalf("lane of a: %+v", l)
	}
	if q := occ.Queues[Background]; q.Waiting != 1 {
		t.Fatalf("b waits behind a: %+v", q)
	}
	h.run(500)
	if occ = h.occupancy(); len(occ.Lanes) != 0 || occ.Queues[Background].Waiting != 0 || !occ.Queues[Background].Oldest.IsZero() {
		t.Fatalf("after both ended: %+v", occ)
	}
}

// The lanes a reader gets are its own copy: the runner's next publication
// does not change them.
func TestOccupancyIsACopy(t *testing.T) {
	h := newHarness(t, 1, 64, Config{}).fast()
	h.submit("a", Request{Prompt: promptOf(1, 8), Class: Chat, MaxTokens: 50})
	h.step()
	h.step()
	occ := h.occupancy()
	if len(occ.Lanes) != 1 {
		t.Fatalf("lanes %+v", occ.Lanes)
	}
	before := occ.Lanes[0]
	h.step()
	h.step()
	if occ.Lanes[0] != before {
		t.Fatalf("a reader's copy changed: %+v → %+v", before, occ.Lanes[0])
	}
	if now := h.occupancy().Lanes[0]; now.Generated <= before.Generated {
		t.Fatalf("the board did not move: %+v → %+v", before, now)
	}
}

func (h *harness) occupancy() Occupancy { return h.stats.occupancy() }

// A lane keeps its slot while others end and start: the next request
// takes the lowest slot free.
func TestOccupancySlots(t *testing.T) {
	h := newHarness(t, 2, 64, Config{}).fast()
	h.submit("short", Request{Prompt: promptOf(1, 8), Class: Chat, MaxTokens: 2})
	h.submit("long", Request{Prompt: promptOf(2, 8), Class: Chat, MaxTokens: 400})
	h.step()
	slots := func() map[uint64]int {
		out := map[uint64]int{}
		for _, l := range h.occupancy().Lanes {
			out[l.ID] = l.Slot
		}
		return out
	}
	short, long := h.jobs["short"].id, h.jobs["long"].id
	if got := slots(); got[short] != 0 || got[long] != 1 || len(got) != 2 {
		t.Fatalf("slots %v", got)
	}
	for range 50 {
		if h.step(); h.done("short") {
			break
		}
	}
	h.submit("next", Request{Prompt: promptOf(3, 8), Class: Chat, MaxTokens: 400})
	for range 5 {
		h.step()
	}
	if got := slots(); got[long] != 1 || got[h.jobs["next"].id] != 0 || len(got) != 2 {
		t.Fatalf("after short ended and next came: %v", got)
	}
}
