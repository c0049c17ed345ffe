package fim

import (
	"errors"
	"testing"
)

var fuzzVocabs = []vocab{qwenVocab, starVocab, llamaVocab, deepseekVocab, mistralVocab}

// FuzzBuild: for arbitrary texts, budgets and windows, in every family,
// Build never panics, never exceeds the budget, fails only when the budget
// cannot hold the markers, and always places each marker once in the
// family's order with the text nearest the cursor kept (checkPrompt).
func FuzzBuild(f *testing.F) {
	f.Add("def f(", "\n    return x", "", "a.go", "package a", "b.go", "B", "repo", "main.go", 64, 0)
	f.Add("", "", "", "", "", "", "", "", "", 3, 0)
	f.Add("x", "y", "typed", "", "chunk one", "", "chunk two", "", "", 12, 4)
	f.Add("long prefix long prefix", "long suffix long suffix", "p", "n", "t", "m", "u", "r", "f", 30, 5)
	f.Add("a", "b", "c", "d", "e", "f", "g", "h", "i", 1, -3)
	builders := make([]*Builder, len(fuzzVocabs))
	for i, v := range fuzzVocabs {
		builders[i] = builderFor(f, v)
	}
	f.Fuzz(func(t *testing.T, prefix, suffix, prompt, n1, t1, n2, t2, repo, file string, budget, window int) {
		budget %= 4096
		r := Request{Prefix: prefix, Suffix: suffix, Prompt: prompt, RepoName: repo, Filename: file,
			Extra: []File{{Name: n1, Text: t1}, {Name: n2, Text: t2}}, Window: window % 4096}
		if t1 == "" && t2 == "" {
			r.Extra = nil
		}
		for _, b := range builders {
			toks, info, err := b.Build(byteTok{}, r, budget)
			if err != nil {
				if !errors.Is(err, ErrBudget) || budget >= b.fixed() {
					t.Fatalf("%v budget %d: %v", b.Family(), budget, err)
				}
				continue
			}
			checkPrompt(t, b, r, budget, toks, info)
		}
	})
}
