package reply

import (
	"encoding/json"
	"strings"
)

// Format is how one chat template writes reasoning and tool calls.
// The zero Format reads everything as content.
type Format struct {
	// Name names the format in logs and /props: "hermes", "qwen3-coder",
	// "generic", "none" …
	Name string
	// think is the reasoning block's markers, when the template has one.
	think *thinkMarkers
	// calls is the template's call syntax; nil when it has none.
	calls callSyntax
	// drops are markers removed from the text wherever they appear
	// (gpt-oss's channel headers that carry no meaning for the client).
	drops []string
	// Generic says the template cannot render tools: the request's tools
	// and the call syntax are described in the system turn (SystemPrompt).
	Generic bool
	// oneCall: the template writes one call a turn at most (Llama 3.x
	// refuses two), so the grammar never asks for more.
	oneCall bool
}

// thinkMarkers open and close a reasoning block.
type thinkMarkers struct{ open, close string }

// Tool is a function a request declares.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object; nil means
	// any object.
	Parameters json.RawMessage
}

// HasReasoning reports whether the format has a reasoning block.
func (f Format) HasReasoning() bool { return f.think != nil }

// HasCalls reports whether the format can carry tool calls.
func (f Format) HasCalls() bool { return f.calls != nil }

// ReasoningEnd is the marker that closes the reasoning block, "" without
// one: a constraint on the answer starts after it.
func (f Format) ReasoningEnd() string {
	if f.think == nil {
		return ""
	}
	return f.think.close
}

// ReasoningStart is the marker that opens the reasoning block, "" without
// one.
func (f Format) ReasoningStart() string {
	if f.think == nil {
		return ""
	}
	return f.think.open
}

// Markers are every text the format gives meaning to. The engine must
// render them as text even when they are special tokens, or the parser
// would never see them (llama.cpp's "preserved tokens").
//
// A marker made of several tokens (DeepSeek-R1's
// "<｜tool▁call▁begin｜>function<｜tool▁sep｜>") is listed whole and
// then piece by piece, each <…> or […] in it, for an engine that renders
// single special tokens.
func (f Format) Markers() []string {
	var texts []string
	if f.think != nil {
		texts = append(texts, f.think.open, f.think.close)
	}
	if f.calls != nil {
		for _, o := range f.calls.openers() {
			texts = append(texts, o.text)
		}
		texts = append(texts, f.calls.markers()...)
	}
	texts = append(texts, f.drops...)
	var out []string
	seen := map[string]bool{}
	add := func(m string) {
		if m != "" && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	for _, m := range texts {
		add(m)
		for _, piece := range markerPieces(m) {
			add(piece)
		}
	}
	return out
}

// markerPieces are the <…> and […] spans of s that hold no whitespace,
// when s has more than the one span that is s itself.
func markerPieces(s string) []string {
	var out []string
	for i := 0; i < len(s); i++ {
		close := map[byte]byte{'<': '>', '[': ']'}[s[i]]
		if close == 0 {
			continue
		}
		j := strings.IndexByte(s[i+1:], close)
		if j < 0 {
			break
		}
		if piece := s[i : i+j+2]; !strings.ContainsAny(piece, " \t\r\n") && piece != s {
			out = append(out, piece)
			i += j + 1
		}
	}
	return out
}

// CallOpeners are the texts that begin a call block: a lazy grammar under
// tool_choice "auto" starts at them.
func (f Format) CallOpeners() []string {
	if f.calls == nil {
		return nil
	}
	var out []string
	for _, o := range f.calls.openers() {
		out = append(out, o.text)
	}
	return out
}

// callSyntax is one way of writing tool calls in generated text.
type callSyntax interface {
	// openers are the texts that begin a call block.
	openers() []opener
	// markers are the syntax's other marker texts (closers, separators).
	markers() []string
	// blockEnd returns the length of the call block at the start of buf,
	// which begins with one of the openers, or -1 while more text is
	// needed to tell. When final (generation has ended) it returns how
	// much of buf it accepts as a block — a block whose closer the model
	// never wrote, say — or -1 when buf cannot be one.
	blockEnd(buf string, final bool) int
	// parse reads the calls of a block blockEnd delimited.
	parse(block string) ([]ToolCall, error)
	// grammar returns GBNF rules, the start rule named root, matching one
	// block of calls to tools: exactly one call unless parallel, when the
	// block may hold one or more (or the rules repeat the block, for the
	// syntaxes that write one block per call).
	grammar(tools []Tool, parallel bool, root string) (string, error)
}

// opener is a text that begins a call block. atStart openers count only at
// the very start of the reply (Llama 3's bare JSON call), where prose could
// not have begun yet.
type opener struct {
	text    string
	atStart bool
}
