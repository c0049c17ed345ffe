package reply

import (
	"encoding/json"
	"strings"

	"superfluid/chat"
)

// The probe: a tool, a question, and calls whose every word is one no
// template writes on its own, so that finding them in a rendering finds
// what the template made of them.
const (
	probeQuestion = "ProbeQuestion4d2a"
	probeAnswer   = "ProbeAnswer9b1e"
	probeThought  = "ProbeThought6c7f"
	probeFnA      = "probe_fn_alpha"
	probeFnB      = "probe_fn_beta"
)

var (
	probeArgsA = json.RawMessage(`{"probe_arg":"probe_value"}`)
	probeArgsB = json.RawMessage(`{"probe_count":7}`)
	probeTools = []json.RawMessage{
		json.RawMessage(`{"type":"function","function":{"name":"probe_fn_alpha","description":"Probe alpha.","parameters":{"type":"object","properties":{"probe_arg":{"type":"string"}},"required":["probe_arg"]}}}`),
		json.RawMessage(`{"type":"function","function":{"name":"probe_fn_beta","description":"Probe beta.","parameters":{"type":"object","properties":{"probe_count":{"type":"integer"}},"required":["probe_count"]}}}`),
	}
)

// probe is what rendering the probe conversations showed of a template.
type probe struct {
	// one and two are the text the template wrote for an assistant turn of
	// one call (probe_fn_alpha) and of two (alpha, then beta), with what it
	// writes for an empty assistant turn taken away from both ends.
	one, two string
	// toolsShown: the tool definitions appear in the prompt.
	toolsShown bool
}

// Detect finds the reasoning and call syntax of t by rendering probe
// conversations (see the package doc). It never fails: a template it
// cannot read gets the generic format, or none when it has no system turn
// to describe the tools in.
func Detect(t *chat.Template, src string) Format {
	f := Format{Name: "none"}
	f.think = detectThink(t, src)
	p, ok := renderProbe(t)
	if ok {
		for _, try := range syntaxProbes {
			if name, s, ok := try(p); ok && readsBack(s, p) {
				f.Name, f.calls = name, s
				return f
			}
		}
	}
	f.Name, f.calls, f.Generic = "generic", genericSyntax(), true
	return f
}

// syntaxProbes are the call syntaxes Detect knows, each given the probe
// and returning the syntax it recognises there. Order matters only where
// two could read the same text; the more specific comes first.
var syntaxProbes = append(jsonProbes, markupProbes...)

// jsonProbes recognise the syntaxes that write a call's arguments as JSON.
var jsonProbes = []func(p probe) (string, callSyntax, bool){
	probeTaggedJSON,
}

// readsBack checks that s parses the probe's renderings into exactly the
// calls that were rendered.
func readsBack(s callSyntax, p probe) bool {
	want := [][]ToolCall{
		{{Name: probeFnA, Arguments: probeArgsA}},
		{{Name: probeFnA, Arguments: probeArgsA}, {Name: probeFnB, Arguments: probeArgsB}},
	}
	for i, text := range []string{p.one, p.two} {
		calls, ok := parseAll(s, text)
		if !ok || len(calls) != len(want[i]) {
			return false
		}
		for j, c := range calls {
			if c.Name != want[i][j].Name || !sameJSON(c.Arguments, want[i][j].Arguments) {
				return false
			}
		}
	}
	return true
}

// parseAll reads text as call blocks, one after another, with only
// whitespace between them.
func parseAll(s callSyntax, text string) ([]ToolCall, bool) {
	var out []ToolCall
	for text = strings.TrimSpace(text); text != ""; text = strings.TrimSpace(text) {
		opened := false
		for _, o := range s.openers() {
			opened = opened || strings.HasPrefix(text, o.text)
		}
		if !opened {
			return nil, false
		}
		n := s.blockEnd(text, true)
		if n <= 0 {
			return nil, false
		}
		calls, err := s.parse(text[:n])
		if err != nil {
			return nil, false
		}
		out = append(out, calls...)
		text = text[n:]
	}
	return out, len(out) > 0
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// renderProbe renders the probe conversations. ok is false when the
// template does not write the calls of an assistant turn at all.
func renderProbe(t *chat.Template) (probe, bool) {
	user := chat.Message{Role: chat.RoleUser, Content: probeQuestion}
	turn := func(calls ...chat.ToolCall) (string, bool) {
		msgs := []chat.Message{user, {Role: chat.RoleAssistant, ToolCalls: calls}}
		out, err := t.Exact(chat.Request{Messages: msgs, Tools: probeTools})
		return out, err == nil
	}
	empty, ok0 := turn()
	if !ok0 {
		// Some templates refuse an assistant turn with no content and no
		// calls; one with content stands in for it.
		msgs := []chat.Message{user, {Role: chat.RoleAssistant, Content: probeAnswer}}
		out, err := t.Exact(chat.Request{Messages: msgs, Tools: probeTools})
		if err != nil {
			return probe{}, false
		}
		empty = strings.Replace(out, probeAnswer, "", 1)
	}
	callA := chat.ToolCall{ID: "call_probe_1", Name: probeFnA, Arguments: probeArgsA}
	callB := chat.ToolCall{ID: "call_probe_2", Name: probeFnB, Arguments: probeArgsB}
	one, ok1 := turn(callA)
	two, ok2 := turn(callA, callB)
	if !ok1 || !ok2 || !strings.Contains(one, probeFnA) || !strings.Contains(two, probeFnB) {
		return probe{}, false
	}
	return probe{one: difference(empty, one), two: difference(empty, two), toolsShown: strings.Contains(empty, "probe_arg")}, true
}

// difference is what b has where a and b differ: b without the prefix
// and suffix it shares with a, widened or narrowed to whole markers. The
// shared prefix can end inside a marker ("<|START_" of <|START_RESPONSE|>
// and <|START_ACTION|>), so the start moves back to the end of the
// previous marker or space; the shared suffix can begin inside one ("<" of
// </tool_call><|im_end|>), so the end moves back to the end of a marker,
// a bracket or a space.
func difference(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	j := 0
	for j < len(a)-i && j < len(b)-i && a[len(a)-1-j] == b[len(b)-1-j] {
		j++
	}
	end := len(b) - j
	for i > 0 && !strings.ContainsRune(" \t\r\n>", rune(b[i-1])) {
		i--
	}
	for end > i && !strings.ContainsRune(" \t\r\n>]})", rune(b[end-1])) {
		end--
	}
	return b[i:end]
}

// probeTaggedJSON recognises calls written as JSON between markers.
func probeTaggedJSON(p probe) (string, callSyntax, bool) {
	one := strings.TrimSpace(p.one)
	start := strings.IndexAny(one, "{[")
	if start < 0 {
		return "", nil, false
	}
	open := strings.TrimSpace(one[:start])
	end := jsonEnd(one, start)
	if end < 0 {
		return "", nil, false
	}
	close := strings.TrimSpace(one[end:])
	list := one[start] == '['
	key := "arguments"
	if strings.Contains(one, `"parameters"`) {
		key = "parameters"
	}
	s := &taggedJSON{open: open, close: close, list: list, argsKey: key}
	if open == "" {
		// A bare object: it opens with its first key, and only at the
		// start of the reply, where prose cannot be mistaken for it.
		s.open, s.atStart = one[start:start+1], true
		if k := strings.Index(one[start:], `"name"`); k > 0 {
			s.open = one[start : start+k+len(`"name"`)]
		}
	}
	name := "tagged-json"
	if open == "<tool_call>" {
		name = "hermes"
	}
	return name, s, true
}

// genericSyntax is the syntax described to a model whose template has
// none: Hermes' tags, which most instruction-tuned models have seen.
func genericSyntax() callSyntax {
	return &taggedJSON{open: "<tool_call>", close: "</tool_call>", argsKey: "arguments"}
}

// detectThink finds the reasoning block: a template that writes a
// reasoning_content between a known pair of markers, or whose source
// names the pair.
func detectThink(t *chat.Template, src string) *thinkMarkers {
	msgs := []chat.Message{{Role: chat.RoleUser, Content: probeQuestion},
		{Role: chat.RoleAssistant, Content: probeAnswer, ReasoningContent: probeThought}}
	out, _ := t.Exact(chat.Request{Messages: msgs})
	for _, m := range knownThink {
		if i := strings.Index(out, probeThought); i >= 0 {
			if strings.Contains(out[:i], m.open) && strings.Contains(out[i:], m.close) {
				return &m
			}
		}
	}
	for _, m := range knownThink {
		if strings.Contains(src, m.open) && strings.Contains(src, m.close) {
			return &m
		}
	}
	return nil
}

// knownThink are the reasoning markers models are trained with.
var knownThink = []thinkMarkers{
	{"<think>", "</think>"},
	{"<seed:think>", "</seed:think>"},
	{"[THINK]", "[/THINK]"},
	{"<|START_THINKING|>", "<|END_THINKING|>"},
}

// OpensReasoning reports whether prompt ends inside an open reasoning
// block: its generation prompt wrote the opening marker (DeepSeek-R1,
// Qwen3.5), so the reply starts as reasoning.
func (f Format) OpensReasoning(prompt string) bool {
	if f.think == nil {
		return false
	}
	tail := strings.TrimRight(prompt, " \t\r\n")
	return strings.HasSuffix(tail, f.think.open)
}

// ClosesReasoning reports whether prompt ends right after a closed,
// reasoning block (a template rendering thinking disabled as an empty
// block): the reply is all answer.
func (f Format) ClosesReasoning(prompt string) bool {
	if f.think == nil {
		return false
	}
	return strings.HasSuffix(strings.TrimRight(prompt, " \t\r\n"), f.think.close)
}
