package tasktest

import (
	"fmt"
	"slices"
	"strings"

	"superfluid/engine"
)

// BanAllPairs is a llama.cpp logit_bias array banning every token of a
// vocabulary of vocab tokens: [[0,false],[1,false],...].
func BanAllPairs(vocab int) string {
	parts := make([]string, vocab)
	for i := range parts {
		parts[i] = fmt.Sprintf("[%d,false]", i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// BanAllObject is a logit_bias object giving value to every token of a
// vocabulary of vocab tokens but skip: {"0":value,"1":value,...}.
func BanAllObject(vocab int, value string, skip ...engine.Token) string {
	var parts []string
	for i := range vocab {
		if !slices.Contains(skip, engine.Token(i)) {
			parts = append(parts, fmt.Sprintf("%q:%s", fmt.Sprint(i), value))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}
