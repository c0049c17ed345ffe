package reply

import (
	"encoding/json"
	"strings"
)

// probeTaggedJSON recognises calls written as JSON objects, alone or in a
// list, between markers: the markers are what surrounds the JSON in the
// probe's rendering, and the keys of the name and the arguments are the
// keys whose values are the probe's.
func probeTaggedJSON(p probe) (string, callSyntax, bool) {
	one := p.one
	start, end := -1, -1
	for i := 0; i < len(one) && start < 0; i++ {
		if one[i] == '{' || one[i] == '[' {
			if e := jsonEnd(one, i); e > 0 && json.Valid([]byte(one[i:e])) {
				start, end = i, e
			}
		}
	}
	if start < 0 || strings.Contains(one[:start], probeFnA) {
		return "", nil, false
	}
	s := &taggedJSON{
		open:  strings.TrimSpace(one[:start]),
		close: strings.TrimSpace(one[end:]),
		list:  one[start] == '[',
	}
	var obj map[string]json.RawMessage
	if s.list {
		var objs []map[string]json.RawMessage
		if json.Unmarshal([]byte(one[start:end]), &objs) != nil || len(objs) != 1 {
			return "", nil, false
		}
		obj = objs[0]
	} else if json.Unmarshal([]byte(one[start:end]), &obj) != nil {
		return "", nil, false
	}
	var ok bool
	if s.nameKey, s.argsKey, ok = callKeys(obj); !ok {
		return "", nil, false
	}
	if !s.list && !p.single {
		// One block for both calls, or a block each.
		if i := strings.Index(p.two, probeFnB); i >= 0 && s.close != "" && !strings.Contains(p.two[:i], s.close) {
			s.multi = true
		}
	}
	if s.open == "" {
		// A bare object: it opens with its first key, and only at the
		// start of the reply, where prose cannot be mistaken for it.
		s.open, s.atStart = one[start:start+1], true
		if k := strings.Index(one[start:], `"`+s.nameKey+`"`); k > 0 && s.nameKey != "" {
			s.open = one[start : start+k+len(s.nameKey)+2]
		}
	}
	return taggedJSONName(s), s, true
}

// callKeys finds the keys of a probe call object: the one whose value is
// the tool's name and the one whose value is its arguments, or, for an
// object keyed by the name, "" and "".
func callKeys(obj map[string]json.RawMessage) (nameKey, argsKey string, ok bool) {
	if args, keyed := obj[probeFnA]; keyed && len(obj) == 1 && sameJSON(args, probeArgsA) {
		return "", "", true
	}
	for k, v := range obj {
		var name string
		if json.Unmarshal(v, &name) == nil && name == probeFnA {
			nameKey = k
		} else if sameJSON(v, probeArgsA) {
			argsKey = k
		}
	}
	return nameKey, argsKey, nameKey != "" && argsKey != ""
}

// taggedJSONName names a tagged-JSON format for logs by the family that
// writes its markers; the syntax itself came from the probe.
func taggedJSONName(s *taggedJSON) string {
	switch {
	case s.open == "<tool_call>":
		return "hermes"
	case s.open == "[TOOL_CALLS]":
		return "mistral-nemo"
	case s.atStart && s.argsKey == "parameters":
		return "llama3"
	case s.open == "<|START_ACTION|>":
		return "command-r7b"
	case strings.HasPrefix(s.open, "Action:"):
		return "command-r"
	case s.open == "functools":
		return "firefunction"
	case s.open == "<TOOLCALL>":
		return "nemotron"
	case s.open == "<tool_calls>" && s.list:
		return "apriel"
	case s.open == "<tool_calls>" && s.multi:
		return "minimax-m1"
	case s.nameKey == "":
		return "apertus"
	case strings.Contains(s.open, "function_call") || strings.Contains(s.open, "function call"):
		return "gigachat"
	case s.open == "<|tool_call|>":
		return "granite"
	}
	return "tagged-json"
}
