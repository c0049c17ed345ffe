package bench

import "testing"

// Against the fake, whose cache is the longest word prefix of any earlier
// prompt and reply: the opening is cold, the edited copy is cached up to
// the edit, and the second turn is cached whole but for its new words.
func TestDivergeMeasuresTheEditedPrompt(t *testing.T) {
	f := newFake(t, nil)
	rep := run(t, Config{URL: f.URL, Scenario: Diverge, Requests: 2, MaxTokens: 5, PromptTokens: 400})
	d := rep.Diverge
	if d == nil || d.Conversations != 2 || d.Cold.Requests.OK != 2 || d.Diverged.Requests.OK != 2 || d.Second.Requests.OK != 2 {
		t.Fatalf("diverge report %+v", d)
	}
	share := func(p Phase) float64 {
		if p.CachedPromptShare == nil {
			t.Fatalf("no cached share in %+v", p)
		}
		return *p.CachedPromptShare
	}
	if c := share(d.Cold); c > 0.05 {
		t.Errorf("the openings found %.2f of their prompt cached: not cold", c)
	}
	if s := share(d.Diverged); s < 0.75 || s > divergeKept {
		t.Errorf("the edited prompts found %.2f cached, want just under the %.2f kept", s, divergeKept)
	}
	if s := share(d.Second); s < 0.9 {
		t.Errorf("the second turns found %.2f cached, want nearly all", s)
	}
	if rep.Key == nil || rep.Key.Name != "diverged_cached_share" || rep.Key.Met == nil || !*rep.Key.Met {
		t.Errorf("key %+v", rep.Key)
	}
	if len(f.requests("/v1/chat/completions")) != 7 { // the endpoint probe and two conversations of three
		t.Errorf("%d chat requests", len(f.requests("/v1/chat/completions")))
	}
}
