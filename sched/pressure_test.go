package sched

import (
	"slices"
	"testing"

	"superfluid/engine"
)

// pressureCache is the fake cache with the pressure calls recorded. Its
// "parking" keeps the entry where it is (the disk tier is kv's to test):
// what this checks is the scheduler's side — which stream is parked, and
// that the lane resumes from it.
type pressureCache struct {
	*fakeCache
	shed          []bool
	parked        [][]engine.Token
	seeded        []int // cached tokens each Acquire found
	bytesPerToken int64
}

func (c *pressureCache) Acquire(tokens []engine.Token) (int32, int, error) {
	seq, n, err := c.fakeCache.Acquire(tokens)
	c.seeded = append(c.seeded, n)
	return seq, n, err
}

func (c *pressureCache) ShedMemory(on bool) int64 {
	c.shed = append(c.shed, on)
	return 1000
}

func (c *pressureCache) ParkStream(tokens []engine.Token) int64 {
	c.parked = append(c.parked, slices.Clone(tokens))
	return int64(len(tokens)) * c.bytesPerToken
}

func newPressureHarness(t *testing.T, lanes int) (*harness, *pressureCache) {
	h := newHarness(t, lanes, 4096, Config{}).fast()
	pc := &pressureCache{fakeCache: h.cache, bytesPerToken: 10}
	h.loop.cache = pc
	return h, pc
}

// At Critical, a decoding Background lane is preempted and its stream
// parked; no Background job is admitted while it lasts, the other classes
// are; when it clears, the parked job resumes from its stream (warm) and
// ends with the output of a run never parked.
func TestCriticalPressureParksBackgroundLanesAndResumesThemWarm(t *testing.T) {
	h, pc := newPressureHarness(t, 3)
	bg := Request{Prompt: promptOf(1, 200), Class: Background, MaxTokens: 60}
	agent := Request{Prompt: promptOf(2, 100), Class: Agent, MaxTokens: 30}
	h.submit("bg", bg)
	h.submit("agent", agent)
	for range 200 {
		if l := h.loop.p.laneOf(h.jobs["bg"]); l != nil && l.produced >= 10 {
			break
		}
		h.step()
	}
	produced := len(h.tokens("bg"))
	if produced < 10 {
		t.Fatalf("the background job made %d tokens before the pressure, want 10", produced)
	}

	h.loop.setPressure(PressureCritical)
	h.step()
	if h.laneOf("bg") != 0 {
		t.Fatal("the background lane still runs at critical pressure")
	}
	if len(pc.parked) != 1 || len(pc.parked[0]) != len(bg.Prompt)+produced-1 {
		t.Fatalf("parked %d streams (%v); want the one lane's prompt and reply so far, %d tokens", len(pc.parked), lens(pc.parked), len(bg.Prompt)+produced-1)
	}
	if !slices.Equal(pc.shed, []bool{true}) {
		t.Fatalf("shedding calls %v, want [true]", pc.shed)
	}
	late := Request{Prompt: promptOf(3, 50), Class: Background, MaxTokens: 5}
	chat := Request{Prompt: promptOf(4, 40), Class: Chat, MaxTokens: 8}
	h.submit("late", late)
	h.submit("chat", chat)
	for range 300 {
		if h.done("chat") && h.done("agent") {
			break
		}
		h.step()
	}
	if !h.done("chat") || !h.done("agent") {
		t.Fatal("chat and agent work did not run at critical pressure")
	}
	for range 20 {
		h.step()
	}
	if h.laneOf("bg") != 0 || h.laneOf("late") != 0 || len(h.tokens("late")) != 0 || len(h.tokens("bg")) != produced {
		t.Fatalf("background work ran at critical pressure: bg %d tokens (was %d), late %d", len(h.tokens("bg")), produced, len(h.tokens("late")))
	}
	snap := h.stats.Snapshot()
	if snap.PressureParks != 1 || snap.PressureEvictedBytes != 1000+uint64(len(pc.parked[0]))*10 {
		t.Fatalf("counted %d parks and %d bytes; want 1 and %d", snap.PressureParks, snap.PressureEvictedBytes, 1000+len(pc.parked[0])*10)
	}

	seeds := len(pc.seeded)
	h.loop.setPressure(PressureNone)
	h.run(2000)
	if !slices.Equal(pc.shed, []bool{true, false}) {
		t.Fatalf("shedding calls %v, want [true false]", pc.shed)
	}
	if pc.seeded[seeds] != len(pc.parked[0]) {
		t.Fatalf("the parked job resumed with %d tokens cached, want its whole parked stream of %d", pc.seeded[seeds], len(pc.parked[0]))
	}
	h.expectOutput("bg", bg)
	h.expectOutput("late", late)
	h.expectOutput("agent", agent)
	h.expectOutput("chat", chat)
	if r := h.result("bg"); r.Preemptions != 1 || r.Err != nil {
		t.Fatalf("bg result %+v", r)
	}
}

// Warning sheds the cache but parks no lane and admits everything.
func TestWarningShedsTheCacheButParksNoLane(t *testing.T) {
	h, pc := newPressureHarness(t, 2)
	h.loop.setPressure(PressureWarning)
	h.loop.setPressure(PressureCritical) // crossing within the shedding levels: no second call
	h.loop.setPressure(PressureWarning)
	bg := Request{Prompt: promptOf(5, 80), Class: Background, MaxTokens: 20}
	h.submit("bg", bg)
	h.run(500)
	h.expectOutput("bg", bg)
	if !slices.Equal(pc.shed, []bool{true}) || len(pc.parked) != 0 || h.stats.Snapshot().PressureParks != 0 {
		t.Fatalf("at warning: shedding calls %v, %d parked; want [true] and none", pc.shed, len(pc.parked))
	}
}

func lens(ss [][]engine.Token) []int {
	var out []int
	for _, s := range ss {
		out = append(out, len(s))
	}
	return out
}
