package sched

import (
	"slices"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// repeatingPrompt is text that repeats with the period the fake model
// continues it with.
func repeatingPrompt(period, n int) []engine.Token {
	p := make([]engine.Token, n)
	for i := range p {
		p[i] = engine.Token(10 + (i*7)%period + 3*(i%period))
	}
	return p
}

// specRun runs the requests to their ends on a fake engine whose model
// repeats itself, with spec as the configuration, and returns each one's
// tokens and the counters.
func specRun(t *testing.T, spec Speculation, period int, reqs map[string]Request) (map[string][]engine.Token, Snapshot, *harness) {
	t.Helper()
	return specRunDrafter(t, spec, period, reqs, nil)
}

// specRunDrafter is specRun with spec's drafter made by drafter (nil:
// none) on the run's virtual clock.
func specRunDrafter(t *testing.T, spec Speculation, period int, reqs map[string]Request, drafter func(*fakeClock) engine.Drafter) (map[string][]engine.Token, Snapshot, *harness) {
	t.Helper()
	clock := newFakeClock()
	eng := enginetest.New(4, 64, 20, 1<<20, clock)
	eng.Descriptor().Drafts = true
	if drafter != nil {
		spec.Drafter = drafter(clock)
	}
	h := newHarnessOn(t, eng, clock, Config{Speculation: spec})
	h.eng.Period = period
	h.eng.KeepPlans = true
	names := make([]string, 0, len(reqs))
	for name := range reqs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		h.submit(name, reqs[name])
	}
	h.run(10_000)
	out := map[string][]engine.Token{}
	for _, name := range names {
		out[name] = h.tokens(name)
		if r := h.result(name); r.Err != nil {
			t.Fatalf("%s: %v", name, r.Err)
		}
	}
	return out, h.stats.Snapshot(), h
}

// Lanes with drafts give exactly the tokens they give without, the
// drafts land on a model that repeats itself, and a step carries several
// tokens of a lane.
func TestSpeculationGivesThePlainTokens(t *testing.T) {
	reqs := map[string]Request{
		"chat":    {Prompt: repeatingPrompt(9, 40), Class: Chat, MaxTokens: 60},
		"agent":   {Prompt: repeatingPrompt(9, 30), Class: Agent, MaxTokens: 45, Logprobs: 2},
		"stopped": {Prompt: repeatingPrompt(9, 35), Class: Background, MaxTokens: 50, StopTokens: []engine.Token{repeatingPrompt(9, 35)[20]}},
	}
	plain, ps, _ := specRun(t, Speculation{}, 9, reqs)
	for _, gated := range []bool{false, true} {
		got, s, h := specRun(t, Speculation{Type: SpecNgramSimple, DraftMax: 6, Ungated: !gated}, 9, reqs)
		for name := range reqs {
			if !slices.Equal(got[name], plain[name]) {
				t.Fatalf("gated %v: %s: with drafts %v\nwithout %v", gated, name, got[name], plain[name])
			}
			r := h.result(name)
			if r.DraftAccepted > r.DraftTokens || (r.DraftTokens > 0) != (r.DraftAccepted > 0) {
				t.Fatalf("gated %v: %s: %d of %d drafts accepted", gated, name, r.DraftAccepted, r.DraftTokens)
			}
		}
		if s.DraftAccepted == 0 || s.DraftAccepted > s.DraftTokens {
			t.Fatalf("gated %v: %d of %d draft tokens accepted", gated, s.DraftAccepted, s.DraftTokens)
		}
		if s.DecodeTokens != ps.DecodeTokens || s.Ticks >= ps.Ticks {
			t.Fatalf("gated %v: %d tokens in %d steps with drafts, %d in %d without", gated, s.DecodeTokens, s.Ticks, ps.DecodeTokens, ps.Ticks)
		}
		for _, pl := range h.eng.Plans {
			if len(pl.Prefills) > 0 && len(pl.Tokens) > 0 {
				for _, d := range pl.Decodes {
					if d.DraftLen > 0 {
						t.Fatalf("gated %v: a draft beside a prefill: %+v", gated, pl)
					}
				}
			}
			if rows := pl.Rows(); rows > 64 {
				t.Fatalf("gated %v: a step of %d rows in a batch of 64", gated, rows)
			}
		}
	}
}

// On a model that never repeats, drafts (found by chance, from single
// tokens recurring) are never accepted: the gates close, the waits double,
// and the steps drafting took are a small share of the run.
func TestSpeculationGateClosesWhenDraftsNeverLand(t *testing.T) {
	reqs := map[string]Request{
		"a": {Prompt: repeatingPrompt(5, 40), Class: Chat, MaxTokens: 600},
		"b": {Prompt: repeatingPrompt(7, 40), Class: Agent, MaxTokens: 600},
	}
	plain, ps, ph := specRun(t, Speculation{}, 0, reqs)
	got, s, h := specRun(t, Speculation{Type: SpecNgramSimple, NgramMin: 1}, 0, reqs)
	for name := range reqs {
		if !slices.Equal(got[name], plain[name]) {
			t.Fatalf("%s differs with drafts", name)
		}
	}
	if s.DraftTokens == 0 || s.DraftGateClosed == 0 {
		t.Fatalf("%d draft tokens, gate closed %d times", s.DraftTokens, s.DraftGateClosed)
	}
	drafted := 0
	for _, pl := range h.eng.Plans {
		for _, d := range pl.Decodes {
			if d.DraftLen > 0 {
				drafted++
				break
			}
		}
	}
	loss := float64(h.clock.Now().Sub(ph.clock.Now())) / float64(ph.clock.Now().Sub(epoch))
	t.Logf("%d of %d steps drafted, %d of %d draft tokens accepted, %d closes; virtual time %+.2f%% against no drafts",
		drafted, len(h.eng.Plans), s.DraftAccepted, s.DraftTokens, s.DraftGateClosed, 100*loss)
	if drafted*10 > len(h.eng.Plans) {
		t.Fatalf("%d of %d steps carried drafts that never land", drafted, len(h.eng.Plans))
	}
	if s.Ticks < ps.Ticks {
		t.Fatalf("fewer steps (%d) than without drafts (%d) though none landed", s.Ticks, ps.Ticks)
	}
}

// When the batch has no room for every lane's draft, better classes draft
// first: a Chat lane's draft is never left out for an Agent lane's.
func TestDraftRowsGoToBetterClassesFirst(t *testing.T) {
	clock := newFakeClock()
	eng := enginetest.New(4, 8, 20, 1<<20, clock)
	eng.Descriptor().Drafts = true
	h := newHarnessOn(t, eng, clock, Config{Speculation: Speculation{Type: SpecNgramSimple, DraftMax: 4, Ungated: true}})
	h.eng.Period = 6
	h.eng.KeepPlans = true
	// Distinct first tokens: no request waits for another's prefix.
	prompt := func(first engine.Token) []engine.Token {
		return append([]engine.Token{first}, repeatingPrompt(6, 23)...)
	}
	// Long replies (a short Chat reply would hold the agents' prompts back
	// until it is done, and never decode beside them); the chat's the
	// longest, so it may draft in full in every step beside the agents.
	h.submit("agent1", Request{Prompt: prompt(900), Class: Agent, MaxTokens: 200})
	h.submit("agent2", Request{Prompt: prompt(901), Class: Agent, MaxTokens: 200})
	h.submit("chat", Request{Prompt: prompt(902), Class: Chat, MaxTokens: 600})
	var chatTag uint32
	for i := 0; chatTag == 0 && i < 100; i++ {
		h.step()
		chatTag = h.laneOf("chat")
	}
	h.run(1000)
	squeezed := 0
	for _, pl := range h.eng.Plans {
		if len(pl.Prefills) > 0 || len(pl.Decodes) < 3 {
			continue
		}
		var chat, agents uint32
		for _, d := range pl.Decodes {
			if d.Lane == chatTag {
				chat = d.DraftLen
			} else {
				agents += d.DraftLen
			}
		}
		if chat < 4 && agents > 0 {
			t.Fatalf("the chat lane drafted %d beside agents' %d: %+v", chat, agents, pl.Decodes)
		}
		if chat == 4 && agents < 8 {
			squeezed++
		}
	}
	if squeezed == 0 {
		t.Fatal("no step was short of room for every draft")
	}
}

// A lane whose drafts were sized down to one token (none accepted) still
// probes again with drafts of --spec-draft-n-min, and so keeps measuring.
func TestDraftMinHoldsAgainstSizing(t *testing.T) {
	reqs := map[string]Request{"a": {Prompt: repeatingPrompt(5, 40), Class: Chat, MaxTokens: 600}}
	_, s, h := specRun(t, Speculation{Type: SpecNgramSimple, NgramMin: 1, DraftMin: 2, DraftMax: 4}, 0, reqs)
	for _, pl := range h.eng.Plans {
		for _, d := range pl.Decodes {
			if d.DraftLen == 1 {
				t.Fatalf("a draft of 1 under a draft min of 2: %+v", d)
			}
		}
	}
	if s.DraftGateClosed < 2 {
		t.Fatalf("the gate closed %d times: the lane stopped probing", s.DraftGateClosed)
	}
}
