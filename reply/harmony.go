package reply

import (
	"fmt"
	"strings"

	"superfluid/grammar"
)

// gpt-oss writes its reply in harmony channels after the prompt's
// "<|start|>assistant":
//
//	<|channel|>analysis<|message|>REASONING<|end|><|start|>assistant<|channel|>final<|message|>ANSWER<|return|>
//	<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}<|call|>
//	 to=functions.NAME<|channel|>commentary json<|message|>{…}<|call|>
//
// Reasoning is the analysis channel, content the final one (and a
// commentary message with no recipient, a preamble to the user), calls
// the messages addressed to functions.*. The headers that carry no
// meaning for a client are dropped.
const (
	harmonyMessage  = "<|message|>"
	harmonyCall     = "<|call|>"
	harmonyAnalysis = "<|channel|>analysis<|message|>"
)

// harmonyCalls reads one call message: from its header to <|call|>.
type harmonyCalls struct{}

func (harmonyCalls) openers() []opener {
	return []opener{
		{text: "<|start|>assistant to="},
		{text: "<|start|>assistant<|channel|>commentary to="},
		{text: "<|channel|>commentary to="},
		{text: " to=", atStart: true},
		{text: "to=", atStart: true},
	}
}

func (harmonyCalls) markers() []string { return []string{harmonyMessage, harmonyCall, "<|constrain|>"} }

func (harmonyCalls) blockEnd(buf string, final bool) int {
	m := strings.Index(buf, harmonyMessage)
	if m < 0 {
		if final || len(buf) > 512 {
			return -1
		}
		return -1
	}
	end := jsonEnd(buf, m+len(harmonyMessage))
	if end < 0 {
		if end == -1 && !final {
			return -1
		}
		return len(buf) // not a call: parse refuses it, and it goes out as content
	}
	after := skipSpace(buf, end)
	full, partial := hasPrefixOrIsPrefix(buf[after:], harmonyCall)
	switch {
	case full:
		return after + len(harmonyCall)
	case partial && !final:
		return -1
	}
	return end
}

func (harmonyCalls) parse(block string) ([]ToolCall, error) {
	header, body, ok := strings.Cut(block, harmonyMessage)
	if !ok {
		return nil, fmt.Errorf("the call has no %s", harmonyMessage)
	}
	_, to, ok := strings.Cut(header, "to=")
	if !ok {
		return nil, fmt.Errorf("the call has no recipient")
	}
	if i := strings.IndexAny(to, " <"); i >= 0 {
		to = to[:i]
	}
	name := strings.TrimPrefix(to, "functions.")
	if name == "" {
		return nil, fmt.Errorf("the call names no function")
	}
	body = strings.TrimSuffix(strings.TrimSpace(body), harmonyCall)
	args, err := argumentsObject([]byte(body))
	if err != nil {
		return nil, fmt.Errorf("call %q: %w", name, err)
	}
	return []ToolCall{{Name: name, Arguments: args}}, nil
}

// grammar: a call message in either of the headers gpt-oss writes, from
// any of the openers (a lazy grammar starts at one), then the arguments.
// gpt-oss makes one call per message and stops, so parallel calls are not
// written.
func (harmonyCalls) grammar(tools []Tool, parallel bool, root string) (string, error) {
	if len(tools) == 0 {
		return "", fmt.Errorf("no tools to call")
	}
	var alts []string
	var rules strings.Builder
	for i, t := range tools {
		params := t.Parameters
		if len(params) == 0 {
			params = []byte(`{"type":"object"}`)
		}
		start, r, err := schemaRules(params, "root")
		if err != nil {
			return "", fmt.Errorf("tool %q: %w", t.Name, err)
		}
		prefix := fmt.Sprintf("%s-t%d-", root, i)
		rules.WriteString(grammar.Prefixed(r, prefix))
		name := grammar.Literal(t.Name)
		header := fmt.Sprintf(`( %s %s %s | " "? %s %s %s )`,
			grammar.Literal("<|channel|>commentary to=functions."), name, grammar.Literal(" <|constrain|>json"+harmonyMessage),
			grammar.Literal("to=functions."), name, grammar.Literal("<|channel|>commentary json"+harmonyMessage))
		alts = append(alts, fmt.Sprintf(`%s? %s %s %s?`, grammar.Literal("<|start|>assistant"), header, prefix+start, grammar.Literal(harmonyCall)))
	}
	return fmt.Sprintf("%s ::= %s\n%s", root, strings.Join(alts, " | "), rules.String()), nil
}

// harmonyDrops are the headers of the final channel and a preamble, and
// the ends of messages.
var harmonyDrops = []string{
	"<|start|>assistant<|channel|>final<|message|>",
	"<|channel|>final<|message|>",
	"<|start|>assistant<|channel|>commentary<|message|>",
	"<|channel|>commentary<|message|>",
	"<|start|>assistant<|channel|>analysis<|message|>",
	"<|return|>",
	"<|end|>",
}

// harmonyFormat is gpt-oss's format.
func harmonyFormat() Format {
	return Format{Name: "harmony", think: &thinkMarkers{open: harmonyAnalysis, close: "<|end|>"},
		calls: harmonyCalls{}, drops: harmonyDrops}
}

// shape gives the format harmony's reasoning channel and the headers it
// drops: Detect's reasoning markers are pairs of tags, which harmony's
// channels are not.
func (harmonyCalls) shape(f *Format) {
	h := harmonyFormat()
	f.think, f.drops = h.think, h.drops
}

// probeHarmony recognises a harmony template: its rendering of the probe
// call is a message addressed to functions.probe_fn_alpha whose body, after
// <|message|>, is the arguments.
func probeHarmony(p probe) (string, callSyntax, bool) {
	if !strings.Contains(p.one, "to=functions."+probeFnA) || !strings.Contains(p.one, harmonyMessage) {
		return "", nil, false
	}
	return "harmony", harmonyCalls{}, true
}
