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
	// writes for a turn without calls taken away from both ends.
	one, two string
	// single: the template writes one call per turn at most (it refuses
	// two, or drops the second); two is then "".
	single bool
	// contentLead is what the template writes before an answer's content
	// (see contentLead).
	contentLead string
	// contentWrap are the markers the template writes around an answer's
	// content, when it writes one before and after it.
	contentWrap []string
	// alt is the probe read without cutting what the generation prompt
	// ends with, when that differs: tried when p finds no syntax.
	alt *probe
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
		for _, p := range p.readings() {
			for _, try := range syntaxProbes {
				if name, s, ok := try(p); ok && (readsBack(s, p) || readsBack(s, narrowProbe(s, p))) {
					f.Name, f.calls = name, s
					f.drops, f.oneCall = leadDrops(s, p), p.single
					if sh, ok := s.(formatShaper); ok {
						sh.shape(&f)
					}
					return withBuiltins(f, t)
				}
			}
		}
	}
	if name, s, ok := describedSyntax(src); ok {
		f.Name, f.calls = name, s
		return f
	}
	f.Name, f.calls, f.Generic = "generic", genericSyntax(), true
	return f
}

// syntaxProbes are the call syntaxes Detect knows, each given the probe
// and returning the syntax it recognises there. Order matters only where
// two could read the same text; the more specific comes first, and the
// named-JSON probe, which reads any "marker name marker {arguments}"
// layout, comes after the markup ones, which know their formats by name.
var syntaxProbes = append(append(append([]func(p probe) (string, callSyntax, bool){}, jsonProbes...), markupProbes...), probeNamedJSON)

// jsonProbes recognise the syntaxes that write a call as a JSON object.
var jsonProbes = []func(p probe) (string, callSyntax, bool){
	probeTaggedJSON,
	probePythonic,
}

// leadDrops are the markers to drop from the reply: those the template
// writes around an answer's content (Command R7B's <|START_RESPONSE|>),
// and what it writes before the content when that begins like a call
// (Functionary v3.2's ">>>all\n", where "all" is the content's channel),
// which would otherwise open a call that never parses.
func leadDrops(s callSyntax, p probe) []string {
	out := append([]string(nil), p.contentWrap...)
	lead := strings.TrimLeft(p.contentLead, " \t\r\n")
	if lead == "" {
		return out
	}
	for _, o := range s.openers() {
		if strings.HasPrefix(lead, o.text) && len(lead) > len(o.text) {
			return append(out, lead)
		}
	}
	return out
}

// readsBack checks that s parses the probe's renderings into exactly the
// calls that were rendered.
func readsBack(s callSyntax, p probe) bool {
	want := [][]ToolCall{
		{{Name: probeFnA, Arguments: probeArgsA}},
		{{Name: probeFnA, Arguments: probeArgsA}, {Name: probeFnB, Arguments: probeArgsB}},
	}
	for i, text := range []string{p.one, p.two} {
		if i == 1 && p.single {
			break
		}
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

// genericSyntax is the syntax described to a model whose template has
// none: Hermes' tags, which most instruction-tuned models have seen.
func genericSyntax() callSyntax {
	return &taggedJSON{open: "<tool_call>", close: "</tool_call>", nameKey: "name", argsKey: "arguments"}
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
	if m := probeThink(t, out); m != nil {
		return m
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
	{"<mm:think>", "</mm:think>"},
	{"<|open|>think<|sep|>", "<|close|>think<|sep|>"},
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
