package sched

import (
	"math"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// loraHarness is a harness over a fake engine holding two adapters.
func loraHarness(t *testing.T, lanes int) *harness {
	t.Helper()
	clock := newFakeClock()
	eng := enginetest.New(lanes, 64, 4*lanes+4, 1<<20, clock)
	eng.SetLoRA(2)
	eng.KeepPlans = true
	return newHarnessOn(t, eng, clock, Config{})
}

func (h *harness) expectOutputUnder(name string, req Request) {
	h.t.Helper()
	want := enginetest.ReferenceUnder(req.Prompt, req.MaxTokens, h.eng.EOGEvery, req.StopTokens, h.eng.Descriptor().Ctx, req.LoRA)
	if got := h.tokens(name); !equalTokens(got, want) {
		h.t.Fatalf("%s (LoRA %v): output differs from its lone run\n got %v\nwant %v", name, req.LoRA, head(got), head(want))
	}
}

// Requests under different adapter sets running at once each give what
// they give alone: no step mixes sets (the fake model's rows depend on the
// step's scales, so a lane run under another set's step differs).
func TestLoRASetsNeverShareAStep(t *testing.T) {
	h := loraHarness(t, 4)
	reqs := map[string]Request{
		"a1":   {Prompt: promptOf(1, 90), MaxTokens: 20, LoRA: []float32{1, 0}},
		"a2":   {Prompt: promptOf(2, 30), MaxTokens: 25, LoRA: []float32{1, 0}},
		"b":    {Prompt: promptOf(3, 70), MaxTokens: 20, LoRA: []float32{0, 0.5}},
		"base": {Prompt: promptOf(4, 50), MaxTokens: 20},
		"zero": {Prompt: promptOf(5, 40), MaxTokens: 10, LoRA: []float32{0, 0}}, // all zero: the base set
	}
	for name, r := range reqs {
		h.submit(name, r)
	}
	h.run(2000)
	for name, r := range reqs {
		h.expectOutputUnder(name, r)
	}
	// Sets took turns: more than one set ran while several lanes were live.
	sets := map[uint64]bool{}
	for i := range h.eng.Plans {
		sets[enginetest.LoRASalt(h.eng.Plans[i].LoRA)] = true
	}
	if len(sets) != 3 {
		t.Errorf("%d sets stepped, want 3 (a, b, none)", len(sets))
	}
}

// A prefix computed under one adapter set never seeds a lane of another:
// the fake's sequences remember the set their cells were computed under,
// so a lane seeded across sets gives another output than its lone run.
func TestLoRANoCachedPrefixCrossesAdapters(t *testing.T) {
	h := loraHarness(t, 2)
	shared := promptOf(7, 80)
	longer := append(append([]engine.Token(nil), shared...), promptOf(8, 10)...)
	steps := []struct {
		name string
		req  Request
	}{
		{"base", Request{Prompt: shared, MaxTokens: 8}},
		{"adapted", Request{Prompt: longer, MaxTokens: 8, LoRA: []float32{1, 0}}},
		{"adapted-again", Request{Prompt: longer, MaxTokens: 8, LoRA: []float32{1, 0}}},
		{"other", Request{Prompt: longer, MaxTokens: 8, LoRA: []float32{0, 1}}},
		{"base-again", Request{Prompt: longer, MaxTokens: 8}},
	}
	hits := map[string]int{}
	for _, s := range steps {
		before := h.cache.hits
		h.submit(s.name, s.req)
		h.run(500)
		h.expectOutputUnder(s.name, s.req)
		hits[s.name] = h.cache.hits - before
	}
	// Each set's own streams serve it: the repeated adapter request and
	// the last base request start warm; the first of each set cold.
	want := map[string]int{"base": 0, "adapted": 0, "adapted-again": 1, "other": 0, "base-again": 1}
	for name, n := range want {
		if hits[name] != n {
			t.Errorf("%s: %d cache hits, want %d", name, hits[name], n)
		}
	}
}

// A set's namespace is one-to-one on tokens, disjoint from other sets'
// and from the base model's (non-negative) tokens; past what int32 holds
// at a vocabulary, no namespace is given and the set runs cold.
func TestCacheNamespaces(t *testing.T) {
	ns := newCacheNamespaces(1000)
	a, b := []float32{1, 0}, []float32{0, 1}
	ia, _ := ns.of(a)
	ib, _ := ns.of(b)
	if again, _ := ns.of(a); ia == ib || again != ia {
		t.Fatalf("namespaces %d, %d, again %d", ia, ib, again)
	}
	toks := []engine.Token{0, 1, 999, 500}
	ta, tb := ns.tag(ia, toks), ns.tag(ib, toks)
	for i := range toks {
		if ta[i] >= 0 || tb[i] >= 0 || ta[i] == tb[i] {
			t.Errorf("token %d: %d and %d", toks[i], ta[i], tb[i])
		}
	}
	if got := untag(ta, 1000); !equalTokens(got, toks) {
		t.Errorf("untagged %v", got)
	}
	if set, ok := ns.setOf(ta[0]); !ok || set != engine.AdapterSetOf(nil, a) {
		t.Errorf("the set of a tagged token: %s %v", set, ok)
	}
	if set, ok := ns.setOf(toks[1]); !ok || !set.IsBase() {
		t.Errorf("a vocabulary token's set: %s %v", set, ok)
	}
	if _, ok := ns.setOf(ns.tag(7, toks)[0]); ok {
		t.Error("a namespace never given names a set")
	}
	big := newCacheNamespaces(1 << 30)
	if _, ok := big.of(a); ok {
		t.Error("a namespace given where int32 holds none")
	}
}

// Every namespace held, a new set gets none (it runs cold); once jobs let
// go, a new set takes the least recently used namespace, emptied in the
// cache first, and the old set's name no longer matches it.
func TestCacheNamespacesReuseTheLeastRecentlyUsed(t *testing.T) {
	full := newCacheNamespaces(1000)
	var dropped []int32
	full.drop = func(ns int32) { dropped = append(dropped, ns) }
	for i := range maxCacheNamespaces {
		if _, ok := full.of([]float32{float32(i + 1)}); !ok {
			t.Fatalf("set %d refused", i)
		}
	}
	if _, ok := full.of([]float32{-1}); ok || len(dropped) != 0 {
		t.Fatalf("a namespace given away while held (dropped %v)", dropped)
	}
	full.release(9)
	full.release(5)
	full.release(5) // once too many: no harm
	full.of([]float32{10})
	full.release(9) // set 10 (namespace 9) used after set 6 (namespace 5)
	old := full.slots[5].set
	ns, ok := full.of([]float32{-1})
	if !ok || ns != 5 || len(dropped) != 1 || dropped[0] != 5 {
		t.Fatalf("new set in namespace %d (%v), dropped %v; want 5", ns, ok, dropped)
	}
	if full.names(5, old) || !full.names(5, engine.AdapterSetOf(nil, []float32{-1})) {
		t.Error("namespace 5 still names its old set")
	}
	if again, _ := full.of([]float32{6}); again != 9 {
		t.Errorf("the evicted set came back in namespace %d, want 9 (the only one free)", again)
	}
}

// Sets found parked take back the namespace their files were keyed in,
// the most recently used first when two claim one.
func TestCacheNamespacesReserveParkedSets(t *testing.T) {
	c := newCacheNamespaces(1000)
	a, b := engine.AdapterSetOf(nil, []float32{1}), engine.AdapterSetOf(nil, []float32{2})
	first := func(ns int32) engine.Token { return c.tag(ns, []engine.Token{3})[0] }
	c.reserve(a, first(4))
	c.reserve(b, first(4)) // older: namespace 4 is a's
	c.reserve(a, first(6)) // a has one
	if set, ok := c.setOf(first(4)); !ok || set != a {
		t.Fatalf("namespace 4 names %s", set)
	}
	if _, ok := c.setOf(first(6)); ok {
		t.Fatal("namespace 6 names a set")
	}
	if ns, _ := c.of([]float32{1}); ns != 4 {
		t.Errorf("set a got namespace %d after a restart, want 4", ns)
	}
	if ns, _ := c.of([]float32{2}); ns != 0 {
		t.Errorf("set b got namespace %d, want the first free, 0", ns)
	}
}

// With no namespace left, an adapter set's lanes run cold and their
// streams are discarded, still each equal to its lone run.
func TestLoRAWithoutANamespaceRunsCold(t *testing.T) {
	h := loraHarness(t, 2)
	h.loop.p.cacheNS.max = 0
	req := Request{Prompt: promptOf(9, 40), MaxTokens: 6, LoRA: []float32{1, 0}}
	for _, name := range []string{"one", "two"} {
		before := h.cache.hits
		h.submit(name, req)
		h.run(500)
		h.expectOutputUnder(name, req)
		if h.cache.hits != before {
			t.Errorf("%s hit the cache", name)
		}
	}
}

// The rule that picks a step's set: starved lanes first, then the best
// class, then the lane that waited longer (two sets of one class
// alternate), then the older lane.
func TestStepAdaptersRule(t *testing.T) {
	set := func(s ...float32) adapterSet { return newAdapterSet(s) }
	a, b := set(1, 0), set(0, 1)
	mk := func(tag uint32, c Class, as adapterSet, starved int) *lane {
		return &lane{tag: tag, job: &job{class: c, adapters: as, prompt: make([]engine.Token, 10)}, setWait: starved}
	}
	for _, c := range []struct {
		name  string
		lanes []*lane
		want  adapterSet
	}{
		{"one set", []*lane{mk(1, Chat, a, 0), mk(2, Chat, a, 0)}, a},
		{"better class", []*lane{mk(1, Background, a, 3), mk(2, Chat, b, 0)}, b},
		{"waited longer", []*lane{mk(1, Chat, a, 0), mk(2, Chat, b, 1)}, b},
		{"older on a tie", []*lane{mk(1, Agent, a, 0), mk(2, Agent, b, 0)}, a},
		{"starved beats class", []*lane{mk(1, Background, a, 8), mk(2, Chat, b, 0)}, a},
		{"no adapter is a set", []*lane{mk(1, FIM, set(0, 0), 2), mk(2, FIM, a, 0)}, adapterSet{}},
		{"no work", []*lane{{tag: 1, job: &job{class: Chat, adapters: a}, finishing: true}}, adapterSet{}},
	} {
		if got := stepAdapters(c.lanes, 8); got.key != c.want.key {
			t.Errorf("%s: set %v, want %v", c.name, got.scales, c.want.scales)
		}
	}
	if !set(0, 0).none() || !set().none() || set(0, 1).none() {
		t.Error("all-zero scales are not the empty set")
	}
}

// Scales the engine would refuse are refused at Submit.
func TestLoRARequestsValidated(t *testing.T) {
	d := &engine.Descriptor{Vocab: 100, Ctx: 64, LoRA: 2}
	for _, bad := range [][]float32{{1}, {1, 2, 3}, {1, float32(engine.MaxLoRAScale) * 2}} {
		r := Request{Prompt: []engine.Token{1, 2}, LoRA: bad}
		if err := r.validate(d); err == nil {
			t.Errorf("scales %v accepted", bad)
		}
	}
	r := Request{Prompt: []engine.Token{1, 2}, LoRA: []float32{0, -1.5}}
	if err := r.validate(d); err != nil {
		t.Errorf("scales %v: %v", r.LoRA, err)
	}
}

// An image's key tokens under an adapter set move into the set's own
// range of the media keys: disjoint from the base model's keys, from
// every other set's, and from every text tag; the stream's first token
// still says its namespace.
func TestCacheNamespacesKeepImagesApart(t *testing.T) {
	for _, vocab := range []int{1000, 151936, 262144} {
		c := newCacheNamespaces(vocab)
		var digest [32]byte
		digest[0] = 7
		keys := mediaKeyTokens(digest, 64)
		seen := map[engine.Token]int64{}
		for _, k := range keys {
			seen[k] = -1
		}
		for _, ns := range []int32{0, 1, c.max - 1} {
			tagged := c.tag(ns, keys)
			text := c.tag(ns, []engine.Token{0, engine.Token(vocab - 1)})
			for i, k := range tagged {
				if got, ok := seen[k]; ok {
					t.Fatalf("vocab %d: namespace %d's key %d is also namespace %d's", vocab, ns, k, got)
				}
				seen[k] = int64(ns)
				if c.nsOf(k) != int64(ns) || int64(k) > -mediaKeyBase || int64(k) < math.MinInt32 {
					t.Fatalf("vocab %d: key %d of namespace %d reads as namespace %d", vocab, k, ns, c.nsOf(k))
				}
				if i == 0 && (int64(text[1]) <= -mediaKeyBase || c.nsOf(text[0]) != int64(ns) || c.nsOf(text[1]) != int64(ns)) {
					t.Fatalf("vocab %d: text tags %v of namespace %d", vocab, text, ns)
				}
			}
		}
		if c.nsOf(keys[0]) != -1 {
			t.Errorf("vocab %d: a base image key reads as namespace %d", vocab, c.nsOf(keys[0]))
		}
	}
}

// With the table full, a new set takes the namespace of a set no job
// holds once that set's jobs have ended, the cache emptied of it first:
// the new set's lane, on the very prompt the old set cached, starts cold
// and answers as its lone run; each set's repeat is warm. While the only
// namespace is held, another set runs cold beside it.
func TestLoRANamespaceChangesHandsWhenLetGo(t *testing.T) {
	h := loraHarness(t, 2)
	h.loop.p.cacheNS.max = 1
	a := Request{Prompt: promptOf(9, 40), MaxTokens: 6, LoRA: []float32{1, 0}}
	b := Request{Prompt: promptOf(9, 40), MaxTokens: 6, LoRA: []float32{0, 1}}
	step := func(name string, req Request, wantHit bool) {
		t.Helper()
		before := h.cache.hits
		h.submit(name, req)
		h.run(500)
		h.expectOutputUnder(name, req)
		if hit := h.cache.hits != before; hit != wantHit {
			t.Errorf("%s: cache hit %v, want %v", name, hit, wantHit)
		}
	}
	step("a", a, false)
	step("a again", a, true)
	step("b", b, false) // namespace 0 changes hands: a's streams dropped
	step("b again", b, true)
	step("a back", a, false)

	// Both at once: one holds the namespace, the other runs cold.
	long := Request{Prompt: promptOf(7, 40), MaxTokens: 60, LoRA: []float32{0, 1}}
	other := Request{Prompt: promptOf(7, 40), MaxTokens: 6, LoRA: []float32{1, 1}}
	h.submit("long", long)
	h.submit("other", other)
	h.run(2000)
	h.expectOutputUnder("long", long)
	h.expectOutputUnder("other", other)
}
