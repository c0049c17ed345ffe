package synth

import (
	"strings"
	"unicode"
)

// builtinVocabTotal is the size of the built-in vocabulary: 256 byte
// tokens, the learned merges, then the special tokens.
const builtinVocabTotal = 1024

// pretoken is one training word split into its current symbols.
type pretoken struct {
	syms   []string
	weight int
}

// trainingWords expands the corpus into weighted pre-tokens, spelled in the
// byte-level alphabet. Weights follow Zipf's law by rank, so the most
// common words are merged into single tokens first.
func trainingWords() []pretoken {
	var words []pretoken
	add := func(s string, w int) {
		if w <= 0 || s == "" {
			return
		}
		enc := encodeBytes(s)
		syms := make([]string, 0, len(enc))
		for _, r := range enc {
			syms = append(syms, string(r))
		}
		words = append(words, pretoken{syms: syms, weight: w})
	}
	for rank, w := range strings.Fields(englishWords) {
		weight := 20000 / (rank + 20)
		add(" "+w, weight)
		add(strings.ToUpper(w[:1])+w[1:], weight/4)
	}
	for rank, f := range codeFragments {
		add(f, 12000/(rank+20))
	}
	return words
}

// trainBPE learns up to target merges from words. Each step merges the
// most frequent adjacent pair (ties broken by the pair's spelling, so the
// result is deterministic); it returns the merges in rank order and the new
// tokens in creation order. A merge whose result already exists (the same
// string reached by a different split) is kept as a merge but adds no
// token, so tokens and merges stay consistent.
func trainBPE(words []pretoken, target int) (merges []string, tokens []string) {
	known := map[string]bool{}
	for _, r := range byteToRune {
		known[string(r)] = true
	}
	for len(tokens) < target {
		counts := map[[2]string]int{}
		for _, w := range words {
			for i := 0; i+1 < len(w.syms); i++ {
				counts[[2]string{w.syms[i], w.syms[i+1]}] += w.weight
			}
		}
		if len(counts) == 0 {
			break
		}
		var best [2]string
		bestCount := -1
		for p, c := range counts {
			if c > bestCount || (c == bestCount && (p[0] < best[0] || (p[0] == best[0] && p[1] < best[1]))) {
				best, bestCount = p, c
			}
		}
		joined := best[0] + best[1]
		merges = append(merges, best[0]+" "+best[1])
		if !known[joined] {
			known[joined] = true
			tokens = append(tokens, joined)
		}
		for wi := range words {
			words[wi].syms = mergePair(words[wi].syms, best, joined)
		}
	}
	return merges, tokens
}

// mergePair replaces every adjacent occurrence of pair in syms, left to
// right, as BPE applies a merge.
func mergePair(syms []string, pair [2]string, joined string) []string {
	out := syms[:0]
	for i := 0; i < len(syms); i++ {
		if i+1 < len(syms) && syms[i] == pair[0] && syms[i+1] == pair[1] {
			out = append(out, joined)
			i++
			continue
		}
		out = append(out, syms[i])
	}
	return out
}

// isWordish reports whether a merged token is made of letters (after an
// optional leading space), used by tests to check the vocabulary learned
// real words.
func isWordish(tok string) bool {
	b, ok := decodeBytes(tok)
	if !ok {
		return false
	}
	s := strings.TrimPrefix(string(b), " ")
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) {
			return false
		}
	}
	return true
}
