package sched

import (
	"slices"
	"testing"

	"superfluid/engine"
)

func TestNgramDraftContinuesTheLatestRepeat(t *testing.T) {
	toks := func(s ...engine.Token) []engine.Token { return s }
	cases := []struct {
		name          string
		history       []engine.Token
		maxN, minN, k int
		want          []engine.Token
	}{
		{"nothing repeats", toks(1, 2, 3, 4), 3, 1, 4, nil},
		{"trigram", toks(1, 2, 3, 4, 5, 9, 1, 2, 3), 3, 1, 2, toks(4, 5)},
		{"k bounds the draft", toks(1, 2, 3, 4, 5, 9, 1, 2, 3), 3, 1, 1, toks(4)},
		{"the latest occurrence wins", toks(1, 2, 7, 8, 1, 2, 5, 6, 0, 1, 2), 2, 1, 2, toks(5, 6)},
		{"a longer match beats a later shorter one", toks(1, 2, 3, 4, 9, 3, 5, 1, 2, 3), 3, 1, 1, toks(4)},
		{"falls back to a single token", toks(5, 6, 7, 8, 6), 3, 1, 3, toks(7, 8, 6)},
		{"the draft may reach the history's end", toks(4, 4, 4), 3, 1, 8, toks(4)},
		{"maxN 0 drafts nothing", toks(1, 1, 1, 1), 0, 1, 4, nil},
		{"k 0 drafts nothing", toks(1, 1, 1, 1), 3, 1, 0, nil},
		{"one token drafts nothing", toks(1), 3, 1, 4, nil},
		{"empty", nil, 3, 1, 4, nil},
		{"minN 2 skips a single-token match", toks(5, 6, 7, 8, 6), 3, 2, 3, nil},
		{"minN 2 takes a bigram", toks(5, 6, 7, 8, 5, 6), 3, 2, 3, toks(7, 8, 5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ngramDraft(nil, c.history, c.maxN, c.minN, c.k)
			if !slices.Equal(got, c.want) {
				t.Fatalf("ngramDraft(%v, n=%d..%d, k=%d) = %v, want %v", c.history, c.minN, c.maxN, c.k, got, c.want)
			}
		})
	}
}

func TestNgramDraftAppendsWithoutAllocatingInPlace(t *testing.T) {
	dst := make([]engine.Token, 0, 16)
	h := []engine.Token{1, 2, 3, 1, 2}
	if n := testing.AllocsPerRun(100, func() { dst = ngramDraft(dst[:0], h, 3, 1, 8) }); n != 0 {
		t.Fatalf("%v allocations per draft into a sized buffer", n)
	}
	if !slices.Equal(dst, []engine.Token{3, 1, 2}) {
		t.Fatalf("draft %v", dst)
	}
}
