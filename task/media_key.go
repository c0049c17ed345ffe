package task

import (
	"superfluid/engine"
	"superfluid/sched"
)

// Keyed is prompt (the submitted prompt, p's placeholders at its images)
// as the prefix cache keys it, each image's positions holding its digest's
// key tokens: what a pin of it names. A nil p has prompt as its key.
func (p *MediaPrompt) Keyed(prompt []engine.Token) []engine.Token {
	if p == nil {
		return prompt
	}
	return sched.KeyedPrompt(prompt, p.Spans)
}
