package task

import (
	"strings"
	"unicode"

	"superfluid/engine"
)

// ReasoningMarker is the text that ends a model's reasoning block, and
// its token when the vocabulary has it as one.
type ReasoningMarker struct {
	Text   string
	Token  engine.Token
	Single bool
}

// ThinkEnd closes the reasoning block of the templates that have one
// (Qwen3, DeepSeek-R1, QwQ …).
const ThinkEnd = "</think>"

// ReasoningEnd reports how the reasoning block of m's chat template ends,
// when it has one and prompt leaves it open: a constraint on the answer
// then starts after it, so that a thinking model still thinks. A template
// that mentions </think> has the block; a prompt that ends with it (a
// template rendering thinking disabled as an empty block) has closed it
// already, and the constraint starts at once.
func ReasoningEnd(m *Model, prompt []engine.Token) (ReasoningMarker, bool) {
	if !strings.Contains(m.Desc.ChatTemplate, ThinkEnd) {
		return ReasoningMarker{}, false
	}
	tail := m.Text.Detokenize(prompt[max(0, len(prompt)-16):], true)
	if strings.HasSuffix(strings.TrimRightFunc(tail, unicode.IsSpace), ThinkEnd) {
		return ReasoningMarker{}, false
	}
	return reasoningMarkerOf(m, ThinkEnd), true
}
