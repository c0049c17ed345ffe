package sched

import (
	"slices"
	"testing"

	"superfluid/engine"
)

// KeyedPrompt is the prompt the cache sees: key tokens at each span, the
// text tokens kept, the caller's prompt untouched.
func TestKeyedPrompt(t *testing.T) {
	prompt := []engine.Token{1, 2, 0, 0, 0, 3, 0, 0, 4}
	orig := slices.Clone(prompt)
	spans := []MediaSpan{{At: 2, N: 3, Digest: [32]byte{1}}, {At: 6, N: 2, Digest: [32]byte{2}}}
	got := KeyedPrompt(prompt, spans)
	want := slices.Concat([]engine.Token{1, 2}, mediaKeyTokens(spans[0].Digest, 3), []engine.Token{3}, mediaKeyTokens(spans[1].Digest, 2), []engine.Token{4})
	if !slices.Equal(got, want) {
		t.Errorf("keyed %v, want %v", got, want)
	}
	if !slices.Equal(prompt, orig) {
		t.Errorf("the prompt was changed: %v", prompt)
	}
	j := &job{prompt: slices.Clone(prompt)}
	j.keyMedia(spans)
	if !slices.Equal(j.prompt, got) {
		t.Errorf("a job keys %v, KeyedPrompt %v", j.prompt, got)
	}
}
