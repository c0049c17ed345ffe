package sched

import (
	"slices"

	"superfluid/engine"
)

// ngramDraft is prompt-lookup drafting (llama.cpp's ngram-simple): the
// tokens that followed the latest earlier occurrence of the history's last
// n tokens, for n from maxN down to minN (a longer match is the better
// guess; one token alone recurs everywhere in prose and seldom predicts
// the next), at most k of them, appended to dst. history is the lane's prompt
// and reply so far, ending with the token the next step feeds. Text that
// repeats what the context holds — a file being edited, code copied from
// the prompt — is continued as it went before; a history that repeats
// nothing gives no draft. O(len(history)) per n.
func ngramDraft(dst, history []engine.Token, maxN, minN, k int) []engine.Token {
	h := len(history)
	if k <= 0 {
		return dst
	}
	for n := min(maxN, h-1); n >= max(minN, 1); n-- {
		pattern := history[h-n:]
		// The latest start j < h-n whose n tokens equal the pattern: what
		// followed it, history[j+n:], is the draft (never empty).
		for j := h - n - 1; j >= 0; j-- {
			if history[j+n-1] != pattern[n-1] || !slices.Equal(history[j:j+n], pattern) {
				continue
			}
			end := min(j+n+k, h)
			return append(dst, history[j+n:end]...)
		}
	}
	return dst
}
