package task

import (
	"strings"

	"superfluid/engine"
	"superfluid/sched"
)

// Keys of prompts with images, for pins: the prefix cache keys an image's
// positions by its digest (sched.MediaKeyTokens), not by the placeholders
// the submitted prompt holds there, so a pin of such a prompt, or of a
// prefix of it, must name those keys.

// Keyed is prompt (the submitted prompt, p's placeholders at its images)
// as the prefix cache keys it, each image's positions holding its digest's
// key tokens: what a pin of it names. A nil p has prompt as its key.
func (p *MediaPrompt) Keyed(prompt []engine.Token) []engine.Token {
	if p == nil {
		return prompt
	}
	return sched.KeyedPrompt(prompt, p.Spans)
}

// KeyedPrefix tokenizes text, the start of the text p was made from (a
// cache breakpoint's rendering), as Keyed's prompt begins: the text between
// media markers as tokens, the i-th marker as p's i-th image's key tokens.
// Where a tokenizer would join text across a marker differently, the
// caller's comparison with Keyed stops there: the prefix is shorter, never
// wrong. A nil p tokenizes text as Tokenize does.
func (p *MediaPrompt) KeyedPrefix(m *Model, text string, addBOS bool) ([]engine.Token, error) {
	if p == nil {
		return Tokenize(m, text, addBOS)
	}
	pieces := strings.Split(text, MediaMarker)
	if len(pieces)-1 > len(p.Spans) {
		return nil, BadRequest("the prefix holds %d images, the prompt %d", len(pieces)-1, len(p.Spans))
	}
	var out []engine.Token
	for i, piece := range pieces {
		if i > 0 {
			s := p.Spans[i-1]
			out = append(out, sched.MediaKeyTokens(s.Digest, s.N)...)
		}
		toks, err := Tokenize(m, piece, addBOS && i == 0)
		if err != nil {
			return nil, err
		}
		out = append(out, toks...)
	}
	return out, nil
}
