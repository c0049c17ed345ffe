package sched

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// fakeDrafter drafts for the fake engine's model, which repeats itself
// every period tokens: right (period > 0) or never (period 0: a token the
// model does not sample). Each call advances the virtual clock by cost.
type fakeDrafter struct {
	period int
	cost   time.Duration
	clock  *fakeClock
	fail   bool
	// calls is the number of calls; batched the most requests one call
	// carried.
	calls, batched int
}

func (d *fakeDrafter) Draft(reqs []engine.DraftRequest) (time.Duration, error) {
	d.calls++
	d.batched = max(d.batched, len(reqs))
	d.clock.Advance(d.cost)
	if d.fail {
		return d.cost, errors.New("the draft model fell over")
	}
	for i := range reqs {
		r := &reqs[i]
		if d.period == 0 {
			r.Draft = slices.Repeat([]engine.Token{engine.Token(19)}, r.Max)
			continue
		}
		h := slices.Clone(r.History)
		for range r.Max {
			if len(h) <= d.period {
				break
			}
			h = append(h, h[len(h)-d.period])
		}
		r.Draft = h[len(r.History):]
	}
	return d.cost, nil
}

func drafterOf(d *fakeDrafter) func(*fakeClock) engine.Drafter {
	return func(c *fakeClock) engine.Drafter {
		d.clock = c
		return d
	}
}

var modelReqs = map[string]Request{
	"chat":  {Prompt: repeatingPrompt(9, 40), Class: Chat, MaxTokens: 60},
	"agent": {Prompt: repeatingPrompt(9, 30), Class: Agent, MaxTokens: 45, Logprobs: 2},
	"bg":    {Prompt: repeatingPrompt(9, 35), Class: Background, MaxTokens: 50},
}

// Drafts from a draft model give the plain tokens whether they land or
// not; one drafter call serves every drafting lane of a step; drafts that
// land make steps carry several tokens a lane.
func TestModelDraftsGiveThePlainTokens(t *testing.T) {
	plain, ps, _ := specRun(t, Speculation{}, 9, modelReqs)
	for _, c := range []struct {
		name  string
		d     *fakeDrafter
		lands bool
	}{
		{"right", &fakeDrafter{period: 9}, true},
		{"wrong", &fakeDrafter{}, false},
	} {
		got, s, _ := specRunDrafter(t, Speculation{Type: SpecDraftSimple, DraftMax: 4, Ungated: true}, 9, modelReqs, drafterOf(c.d))
		for name := range modelReqs {
			if !slices.Equal(got[name], plain[name]) {
				t.Fatalf("%s drafts: %s: %v\nwithout drafts %v", c.name, name, got[name], plain[name])
			}
		}
		if c.d.calls == 0 || c.d.batched < 2 {
			t.Fatalf("%s drafts: %d drafter calls, at most %d lanes in one", c.name, c.d.calls, c.d.batched)
		}
		if s.DraftTokens == 0 || (s.DraftAccepted > 0) != c.lands || (c.lands && s.Ticks >= ps.Ticks) {
			t.Fatalf("%s drafts: %d of %d accepted, %d steps (plain %d)", c.name, s.DraftAccepted, s.DraftTokens, s.Ticks, ps.Ticks)
		}
	}
}

// The gate counts the drafter's time as the drafted step's: drafts that
// all land still close the gate when drafting them costs more than they
// save, and keep it open when it is cheap.
func TestModelDraftGateCountsTheDrafter(t *testing.T) {
	reqs := map[string]Request{
		"a": {Prompt: repeatingPrompt(9, 40), Class: Chat, MaxTokens: 400},
		"b": {Prompt: repeatingPrompt(9, 41), Class: Agent, MaxTokens: 400},
	}
	for _, c := range []struct {
		cost   time.Duration
		closes bool
	}{{0, false}, {time.Second, true}} {
		_, s, _ := specRunDrafter(t, Speculation{Type: SpecDraftSimple, DraftMax: 4}, 9, reqs, drafterOf(&fakeDrafter{period: 9, cost: c.cost}))
		if (s.DraftGateClosed > 0) != c.closes || s.DraftAccepted == 0 {
			t.Fatalf("drafter cost %v: gate closed %d times, %d of %d accepted", c.cost, s.DraftGateClosed, s.DraftAccepted, s.DraftTokens)
		}
	}
}

// A drafter that fails leaves the steps plain: the tokens are the plain
// ones and no draft is counted.
func TestModelDrafterFailureRunsPlain(t *testing.T) {
	plain, _, _ := specRun(t, Speculation{}, 9, modelReqs)
	d := &fakeDrafter{period: 9, fail: true}
	got, s, _ := specRunDrafter(t, Speculation{Type: SpecDraftSimple, Ungated: true}, 9, modelReqs, drafterOf(d))
	for name := range modelReqs {
		if !slices.Equal(got[name], plain[name]) {
			t.Fatalf("%s: %v\nwithout drafts %v", name, got[name], plain[name])
		}
	}
	if d.calls == 0 || s.DraftTokens != 0 {
		t.Fatalf("%d calls, %d draft tokens", d.calls, s.DraftTokens)
	}
}

// A draft model is refused, by flag, without draft-simple, and
// draft-simple without one.
func TestDraftModelSettings(t *testing.T) {
	for _, c := range []struct {
		s    Speculation
		want string
	}{
		{Speculation{Type: SpecDraftSimple}, "--spec-draft-model"},
		{Speculation{Type: SpecNgramSimple, DraftModel: "d.gguf"}, "--spec-type draft-simple"},
		{Speculation{DraftModel: "d.gguf"}, "--spec-type draft-simple"},
		{Speculation{Type: SpecDraftSimple, DraftModel: "d.gguf", DraftPMin: 1.5}, "minimum probability"},
		// The model's own MTP layers take no draft model; a drafter only
		// with a source that drafts with one.
		{Speculation{Type: SpecDraftMTP, DraftModel: "d.gguf"}, "--spec-type draft-simple"},
		{Speculation{Type: SpecNgramSimple, Drafter: &fakeDrafter{period: 9}}, "draft-mtp"},
	} {
		if err := c.s.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.s, err, c.want)
		}
	}
	if err := (Speculation{Type: SpecDraftSimple, DraftModel: "d.gguf", DraftPMin: 0.5}).Check(); err != nil {
		t.Fatal(err)
	}
	if typ, err := ParseSpecType("draft-simple"); err != nil || typ != SpecDraftSimple {
		t.Fatalf("draft-simple: %v, %v", typ, err)
	}
	if typ, err := ParseSpecType("draft-mtp"); err != nil || typ != SpecDraftMTP {
		t.Fatalf("draft-mtp: %v, %v", typ, err)
	}
	if err := (Speculation{Type: SpecDraftMTP}).Check(); err != nil {
		t.Fatal(err)
	}
}

// A draft model whose drafts never land (a random-weight one) costs
// little behind the gate: the gates close, and the run takes under 3%
// more virtual time than without drafts, the drafter's time included.
func TestUselessDraftModelCostsLittle(t *testing.T) {
	reqs := map[string]Request{
		"a": {Prompt: repeatingPrompt(5, 40), Class: Chat, MaxTokens: 600},
		"b": {Prompt: repeatingPrompt(7, 40), Class: Agent, MaxTokens: 600},
	}
	plain, _, ph := specRun(t, Speculation{}, 0, reqs)
	// A draft-model call a tenth of a plain step (30 ms + 10 ms a row).
	d := &fakeDrafter{cost: 5 * time.Millisecond}
	got, s, h := specRunDrafter(t, Speculation{Type: SpecDraftSimple}, 0, reqs, drafterOf(d))
	for name := range reqs {
		if !slices.Equal(got[name], plain[name]) {
			t.Fatalf("%s differs with drafts", name)
		}
	}
	loss := float64(h.clock.Now().Sub(ph.clock.Now())) / float64(ph.clock.Now().Sub(epoch))
	t.Logf("%d drafter calls, %d of %d draft tokens accepted, %d closes; virtual time %+.2f%% against no drafts", d.calls, s.DraftAccepted, s.DraftTokens, s.DraftGateClosed, 100*loss)
	if s.DraftTokens == 0 || s.DraftAccepted != 0 || s.DraftGateClosed == 0 {
		t.Fatalf("%d of %d draft tokens accepted, gate closed %d times", s.DraftAccepted, s.DraftTokens, s.DraftGateClosed)
	}
	if loss > 0.03 {
		t.Fatalf("virtual time %+.2f%% against no drafts: the gate let a useless draft model cost more than 3%%", 100*loss)
	}
}

// Short requests one after another (chat replies, tool calls) under a
// draft model whose drafts never land: a new lane starts from what the
// lanes before it learnt, so the gate's probes do not come back with
// every request, and the run stays within 3% of no drafts.
func TestUselessDraftModelCostsLittleOnShortRequests(t *testing.T) {
	run := func(spec Speculation, d *fakeDrafter) (time.Duration, Snapshot) {
		clock := newFakeClock()
		eng := enginetest.New(4, 64, 20, 1<<20, clock)
		eng.Descriptor().Drafts = true
		if d != nil {
			spec.Drafter = drafterOf(d)(clock)
		}
		h := newHarnessOn(t, eng, clock, Config{Speculation: spec})
		for wave := range 24 {
			for i := range 2 {
				name := fmt.Sprintf("w%d-%d", wave, i)
				h.submit(name, Request{Prompt: repeatingPrompt(5+2*i+wave%3, 40), Class: Chat, MaxTokens: 48})
			}
			h.run(10_000)
		}
		return clock.Now().Sub(epoch), h.stats.Snapshot()
	}
	plain, _ := run(Speculation{}, nil)
	d := &fakeDrafter{cost: 5 * time.Millisecond}
	got, s := run(Speculation{Type: SpecDraftSimple}, d)
	loss := float64(got-plain) / float64(plain)
	t.Logf("%d drafter calls, %d of %d draft tokens accepted, %d closes; virtual time %+.2f%% against no drafts", d.calls, s.DraftAccepted, s.DraftTokens, s.DraftGateClosed, 100*loss)
	if s.DraftTokens == 0 || s.DraftAccepted != 0 {
		t.Fatalf("%d of %d draft tokens accepted: the gate never probed", s.DraftAccepted, s.DraftTokens)
	}
	if loss > 0.03 {
		t.Fatalf("virtual time %+.2f%% against no drafts over 48 short requests: each new lane probed afresh", 100*loss)
	}
}
