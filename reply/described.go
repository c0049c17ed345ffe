package reply

import "strings"

// describedSyntax is the call syntax of a template that renders no calls
// but names its syntax in the system turn it writes for tools (Granite
// 3.3: "respond only with <|tool_call|> followed by a JSON list"): the
// probe cannot show it, so it is read from the template's text.
func describedSyntax(src string) (string, callSyntax, bool) {
	for _, d := range describedSyntaxes {
		if strings.Contains(src, d.mark) {
			return d.name, d.syntax(), true
		}
	}
	return "", nil, false
}

var describedSyntaxes = []struct {
	mark   string // text only that template family's source holds
	name   string
	syntax func() callSyntax
}{
	{"<|tool_call|> followed by a JSON list", "granite", func() callSyntax {
		return &taggedJSON{open: "<|tool_call|>", list: true, nameKey: "name", argsKey: "arguments"}
	}},
	// LFM2 lists the tools between these markers, and its model card
	// gives the call syntax the template never renders.
	{"<|tool_list_start|>", "pythonic", lfm2Syntax},
	{"List of tools: [", "pythonic", lfm2Syntax},
	// Kimi K2 Instruct and Thinking build the call ids with list.append,
	// which the reference sandbox refuses, so no call renders.
	{"<|tool_call_argument_begin|>", "kimi-k2", kimiSourceSyntax},
}

func lfm2Syntax() callSyntax {
	return &pythonic{open: "<|tool_call_start|>", close: "<|tool_call_end|>"}
}
