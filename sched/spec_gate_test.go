package sched

import "testing"

// A lane whose drafts are never accepted commits one token per drafted
// step, which takes longer than a plain one: the gate closes after the
// probe, reopens after the wait, and each failed probe doubles the wait.
func TestLaneGateClosesWhenDraftsDoNotPay(t *testing.T) {
	var g laneGate
	const plain, drafted = 0.030, 0.040 // seconds: 4 draft rows cost a third more
	for i := range specProbeSteps - 1 {
		if g.observeDrafted(1, drafted, plain, defaultSpecMinGain) {
			t.Fatalf("closed after %d drafted steps, before the probe ended", i+1)
		}
	}
	if !g.observeDrafted(1, drafted, plain, defaultSpecMinGain) || g.drafts() {
		t.Fatalf("still open after a probe at gain %.2f", 0.030/0.040)
	}
	for wait := specReprobeSteps; wait <= 4*specReprobeSteps; wait *= 2 {
		for i := range wait {
			if g.drafts() {
				t.Fatalf("reopened after %d plain steps of a %d-step wait", i, wait)
			}
			g.observePlain()
		}
		if !g.drafts() {
			t.Fatalf("still closed after a %d-step wait", wait)
		}
		for range specProbeSteps {
			g.observeDrafted(1, drafted, plain, defaultSpecMinGain)
		}
		if g.drafts() {
			t.Fatal("a failed re-probe left the gate open")
		}
	}
}

func TestLaneGateWaitIsBounded(t *testing.T) {
	var g laneGate
	for range 20 {
		for range specProbeSteps {
			g.observeDrafted(1, 2, 1, defaultSpecMinGain)
		}
		for g.off {
			g.observePlain()
		}
	}
	if g.backoff != specReprobeMaxSteps {
		t.Fatalf("wait %d after 20 failed probes, want the bound %d", g.backoff, specReprobeMaxSteps)
	}
}

// Drafts that land keep the gate open; when the text stops repeating the
// smoothed rate falls below the bar and it closes, and a probe that pays
// afterwards resets the wait.
func TestLaneGateStaysOpenWhileItPays(t *testing.T) {
	var g laneGate
	const plain, drafted = 0.030, 0.040
	for i := range 50 {
		if g.observeDrafted(3, drafted, plain, defaultSpecMinGain) || !g.drafts() {
			t.Fatalf("closed at drafted step %d committing 3 tokens (gain %.2f)", i, 3*plain/drafted)
		}
	}
	closedAfter := 0
	for !g.observeDrafted(1, drafted, plain, defaultSpecMinGain) {
		closedAfter++
		if closedAfter > 20 {
			t.Fatal("never closed once drafts stopped landing")
		}
	}
	if closedAfter == 0 {
		t.Fatal("one bad step closed a gate smoothed over many good ones")
	}
	for g.off {
		g.observePlain()
	}
	for range specProbeSteps {
		g.observeDrafted(3, drafted, plain, defaultSpecMinGain)
	}
	if !g.drafts() || g.backoff != 0 {
		t.Fatalf("a paying probe left drafts %v, wait %d", g.drafts(), g.backoff)
	}
}

// Without a baseline the gate cannot compare and keeps probing.
func TestLaneGateWaitsForABaseline(t *testing.T) {
	var g laneGate
	for range 10 {
		if g.observeDrafted(1, 1, 0, defaultSpecMinGain) {
			t.Fatal("closed without a plain step time to compare with")
		}
	}
}

func TestSpecBaselineIsTakenAndRenewed(t *testing.T) {
	b := newSpecBaseline(4)
	if !b.due(2) || b.plainSecs(2) != 0 {
		t.Fatal("an unmeasured lane count is not due for a baseline")
	}
	b.observe(2, false, 0.02)
	if b.due(2) || b.plainSecs(2) != 0.02 {
		t.Fatalf("after a plain step: due %v, secs %v", b.due(2), b.plainSecs(2))
	}
	for range specBaselineEvery - 1 {
		b.observe(2, true, 0.05)
	}
	if b.due(2) {
		t.Fatal("due before specBaselineEvery drafted steps")
	}
	b.observe(2, true, 0.05)
	if !b.due(2) || b.plainSecs(2) != 0.02 {
		t.Fatalf("after %d drafted steps: due %v, secs %v", specBaselineEvery, b.due(2), b.plainSecs(2))
	}
	if b.due(0) || b.due(5) || b.plainSecs(9) != 0 {
		t.Fatal("lane counts outside the engine's are due or known")
	}
}

// Drafts are sized by the run the lane's drafts are accepted for: a lane
// whose drafts land in full grows them to the bound, one whose drafts
// seldom land drafts one token.
func TestLaneGateSizesDrafts(t *testing.T) {
	var g laneGate
	if k := g.draftLen(8); k != 2 {
		t.Fatalf("an unmeasured lane drafts %d", k)
	}
	k := g.draftLen(8)
	for range 20 {
		g.observeDrafted(k+1, 0.03, 0.03, defaultSpecMinGain) // every draft token accepted
		k = g.draftLen(8)
	}
	if k != 8 {
		t.Fatalf("a lane whose drafts all land drafts %d of 8", k)
	}
	for range 20 {
		g.observeDrafted(1, 0.03, 0.03, defaultSpecMinGain)
		for g.off {
			g.observePlain()
		}
	}
	if k := g.draftLen(8); k != 1 {
		t.Fatalf("a lane whose drafts never land drafts %d", k)
	}
	if k := g.draftLen(1); k != 1 {
		t.Fatalf("draft length %d past the bound 1", k)
	}
}
