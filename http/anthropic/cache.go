package anthropic

import (
	"time"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/task"
)

// Anthropic's prompt caching. A cache_control breakpoint on a tool, a
// system block or a message block marks the prompt up to and including it
// (in Anthropic's order: tools, system, messages) to be kept for its TTL;
// a request-level cache_control marks the whole prompt. Here the prefix
// cache is automatic, so a breakpoint changes what stays resident, not
// what is cached: each marked prefix is pinned in the prefix cache (when
// the model's cache takes pins) so eviction and idle parking pass it over
// until the TTL ends, and usage reports how much of the marked prefix was
// newly computed.

// maxBreakpoints is Anthropic's limit of cache_control blocks.
const maxBreakpoints = 4

// cacheBreak is one breakpoint: the conversation up to it is the first
// tools client tools (all of them when -1), the first system blocks of
// the system prompt, and the first msgs messages, the last of which is cut
// after blocks blocks (whole when -1).
type cacheBreak struct {
	ttl    time.Duration
	tools  int
	system int
	msgs   int
	blocks int
	whole  bool // the request-level breakpoint: the whole prompt
}

// cacheTTL reads a breakpoint's ttl.
func cacheTTL(field string, cc *cacheControl) (time.Duration, error) {
	if cc.Type != "ephemeral" {
		return 0, wire.BadParam(field, "%s.cache_control.type: Input should be 'ephemeral'", field)
	}
	switch cc.TTL {
	case "", "5m":
		return 5 * time.Minute, nil
	case "1h":
		return time.Hour, nil
	}
	return 0, wire.BadParam(field, "%s.cache_control.ttl: Input should be '5m' or '1h'", field)
}

// cacheBreaks lists the request's breakpoints; toolMarks and toolTTLs are
// the tools' (readTools).
func cacheBreaks(req *request, conv conversation, toolMarks []int, toolTTLs []string) ([]cacheBreak, error) {
	var out []cacheBreak
	add := func(field string, cc *cacheControl, b cacheBreak) error {
		ttl, err := cacheTTL(field, cc)
		b.ttl = ttl
		out = append(out, b)
		return err
	}
	for i, n := range toolMarks {
		if err := add("tools", &cacheControl{Type: "ephemeral", TTL: toolTTLs[i]}, cacheBreak{tools: n}); err != nil {
			return nil, err
		}
	}
	for j, b := range conv.system {
		if b.CacheControl != nil {
			if err := add("system", b.CacheControl, cacheBreak{tools: -1, system: j + 1}); err != nil {
				return nil, err
			}
		}
	}
	for i, turn := range conv.msgs {
		for j, b := range turn.blocks {
			if b.CacheControl != nil {
				if err := add("messages", b.CacheControl, cacheBreak{tools: -1, system: -1, msgs: i + 1, blocks: j + 1}); err != nil {
					return nil, err
				}
			}
		}
	}
	if req.CacheControl != nil {
		if err := add("cache_control", req.CacheControl, cacheBreak{whole: true}); err != nil {
			return nil, err
		}
	}
	if len(out) > maxBreakpoints {
		return nil, wire.BadParam("cache_control", "A maximum of %d blocks with cache_control may be provided. Found %d.", maxBreakpoints, len(out))
	}
	return out, nil
}

// upTo is the conversation before b's end.
func (t conversation) upTo(b cacheBreak) conversation {
	out := conversation{system: t.system}
	if b.system >= 0 {
		out.system = t.system[:min(b.system, len(t.system))]
	}
	if b.msgs > 0 {
		out.msgs = append([]turnBlocks(nil), t.msgs[:b.msgs]...)
		last := &out.msgs[b.msgs-1]
		last.blocks = last.blocks[:min(b.blocks, len(last.blocks))]
	}
	return out
}

// markedPrefixes are the prompt lengths the breakpoints mark, longest
// last. A breakpoint's conversation is rendered alone (without the
// generation prompt; with an empty user turn when it holds no message,
// since templates render none without one) and its mark is what that
// rendering shares with the prompt: a template that renders a tool or a
// system block after what follows it in Anthropic's order (Qwen writes the
// tools after the system prompt) marks less than Anthropic would, never
// more. A breakpoint the template cannot render alone marks nothing.
//
// With images, prompt is the keyed prompt (task.MediaPrompt.Keyed) and a
// breakpoint's rendering is tokenized with each image as its key tokens
// (KeyedPrefix), so a mark covers the images before it as the cache keys
// them.
func markedPrefixes(m *task.Model, conv conversation, tools task.Tools, breaks []cacheBreak, prompt []engine.Token, images *task.MediaPrompt) []int {
	out := make([]int, len(breaks))
	for i, b := range breaks {
		if b.whole {
			out[i] = len(prompt)
			continue
		}
		msgs, err := conv.upTo(b).chat(true)
		if err != nil {
			continue
		}
		if len(msgs) == 0 || msgs[len(msgs)-1].Role == chat.RoleSystem {
			msgs = append(msgs, chat.Message{Role: chat.RoleUser})
		}
		t := tools
		if b.tools >= 0 && b.tools < len(t.List) {
			t.List, t.Defs = t.List[:b.tools], t.Defs[:b.tools]
		}
		text, err := prefixText(m, msgs, t)
		if err != nil {
			continue
		}
		toks, err := images.KeyedPrefix(m, text, true)
		if err != nil {
			continue
		}
		out[i] = commonTokens(toks, prompt)
	}
	return out
}

// prefixText renders msgs with tools as task.PlanChat would, without the
// generation prompt.
func prefixText(m *task.Model, msgs []chat.Message, t task.Tools) (string, error) {
	f := m.Reply()
	req := chat.Request{Messages: msgs}
	if t.Active() && f.Format.HasCalls() {
		if f.Format.Generic {
			req.Messages = task.WithSystemText(req.Messages, f.Format.SystemPrompt(t.List))
		} else {
			req.Tools = t.Defs
		}
	}
	return task.ChatPrompt(m, req)
}

func commonTokens(a, b []engine.Token) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// pinMarked pins each marked prefix for its breakpoint's TTL in p, the
// model's cache when it takes pins (nil when not). A prefix of fewer than
// two tokens is not worth one.
func pinMarked(p wire.CachePinner, prompt []engine.Token, breaks []cacheBreak, marks []int) {
	if p == nil {
		return
	}
	for i, n := range marks {
		if n >= 2 {
			p.Pin(prompt[:n:n], breaks[i].ttl)
		}
	}
}

// usageOf counts tokens as Anthropic bills them:
// cache_read_input_tokens are the prompt tokens read from the prefix
// cache, cache_creation_input_tokens those of the marked prefix (the
// longest breakpoint's) that were computed anew, input_tokens the rest;
// the prompt is their sum.
func usageOf(prompt, marked int, out task.Outcome) usage {
	cached := min(out.Result.CachedTokens, prompt)
	created := max(min(marked, prompt)-cached, 0)
	return usage{InputTokens: prompt - cached - created, OutputTokens: out.Completed,
		CacheReadInputTokens: cached, CacheCreationInputTokens: created}
}
