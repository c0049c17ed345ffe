package http

import (
	"strings"
	"unicode"

	"superfluid/engine"
)

// reasoningMarker is the text that ends a model's reasoning block, and
// its token when the vocabulary has it as one.
type reasoningMarker struct {
	text   string
	token  engine.Token
	single bool
}

// thinkEnd closes the reasoning block of the templates that have one
// (Qwen3, DeepSeek-R1, QwQ …).
const thinkEnd = "</think>"

// reasoningEnd reports how the reasoning block of m's chat template ends,
// when it has one and prompt leaves it open: a constraint on the answer
// then starts after it, so that a thinking model still thinks. A template
// that mentions </think> has the block; a prompt that ends with it (a
// template rendering thinking disabled as an empty block) has closed it
// already, and the constraint starts at once.
func reasoningEnd(m *Model, prompt []engine.Token) (reasoningMarker, bool) {
	if !strings.Contains(m.Desc.ChatTemplate, thinkEnd) {
		return reasoningMarker{}, false
	}
	tail := m.Text.Detokenize(prompt[max(0, len(prompt)-16):], true)
	if strings.HasSuffix(strings.TrimRightFunc(tail, unicode.IsSpace), thinkEnd) {
		return reasoningMarker{}, false
	}
	end := reasoningMarker{text: thinkEnd}
	if toks, err := m.Text.Tokenize(thinkEnd, false, true); err == nil && len(toks) == 1 {
		end.token, end.single = toks[0], true
	}
	return end, true
}
