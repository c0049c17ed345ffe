package reply

import (
	"encoding/json"
	"strings"

	"superfluid/chat"
)

// Probe call ids: nine alphanumerics, because Mistral's templates refuse
// any other id, and no other template minds.
const (
	probeIDA = "pr0beid0a"
	probeIDB = "pr0beid0b"
)

// renderProbe renders the probe conversations. ok is false when the
// template does not write the calls of an assistant turn at all.
//
// Templates disagree on what they accept, so each rendering has a
// fallback: an assistant turn with no content may be refused (Ministral)
// or written as nothing at all (Nemotron Nano v2), so the call text is cut
// against several renderings without calls; a turn of calls alone may be
// refused, so it is rendered with content too and the content taken out;
// two calls may be refused (Llama 3.x) or the second silently dropped
// (GigaChat), and then the format is one call per turn.
func renderProbe(t *chat.Template) (probe, bool) {
	user := chat.Message{Role: chat.RoleUser, Content: probeQuestion}
	render := func(content string, calls ...chat.ToolCall) (string, bool) {
		msgs := []chat.Message{user, {Role: chat.RoleAssistant, Content: content, NoContent: content == "" && len(calls) > 0, ToolCalls: calls}}
		out, err := t.Exact(chat.Request{Messages: msgs, Tools: probeTools})
		if err != nil {
			return "", false
		}
		return strings.Replace(out, content, "", 1), true
	}
	var bases, empty []string // renderings of the conversation without calls
	if out, ok := render(""); ok {
		bases, empty = append(bases, out), []string{out}
	}
	if out, ok := render(probeAnswer); ok {
		bases = append(bases, out)
	}
	if len(bases) == 0 {
		return probe{}, false
	}
	// withCalls renders calls, with content where a turn of calls alone
	// is refused, and with the arguments as a JSON string where an object
	// is (templates that concatenate them, as DeepSeek-R1's distills do).
	// A call is rendered when its name appears more often than in the
	// tool definitions alone.
	withCalls := func(want string, calls ...chat.ToolCall) (string, bool) {
		asStrings := make([]chat.ToolCall, len(calls))
		for i, c := range calls {
			s, _ := json.Marshal(string(c.Arguments))
			asStrings[i], asStrings[i].Arguments = c, s
		}
		for _, cs := range [][]chat.ToolCall{calls, asStrings} {
			for _, content := range []string{"", probeAnswer} {
				if out, ok := render(content, cs...); ok && strings.Count(out, want) > strings.Count(bases[0], want) {
					return out, true
				}
			}
		}
		return "", false
	}
	var prefixes []string // and the prompt a reply would follow
	if out, err := t.Exact(chat.Request{Messages: []chat.Message{user}, Tools: probeTools, AddGenerationPrompt: true}); err == nil {
		prefixes = append(prefixes, out)
	}
	callA := chat.ToolCall{ID: probeIDA, Name: probeFnA, Arguments: probeArgsA}
	callB := chat.ToolCall{ID: probeIDB, Name: probeFnB, Arguments: probeArgsB}
	one, ok := withCalls(probeFnA, callA)
	if !ok {
		return probe{}, false
	}
	// turnEnd is the marker that ends a turn of content, which some
	// templates write after calls where an empty turn has another
	// (Nemotron Nano v2's <SPECIAL_12>): it is no part of the call.
	var p probe
	var turnEnd string
	msgs := []chat.Message{user, {Role: chat.RoleAssistant, Content: probeAnswer}}
	withContent, err := t.Exact(chat.Request{Messages: msgs, Tools: probeTools})
	if i := strings.LastIndex(withContent, probeAnswer); err == nil && i >= 0 {
		turnEnd = firstMarker(withContent[i+len(probeAnswer):])
		if len(empty) > 0 {
			p.contentLead = contentLead(empty[0], withContent)
		}
		if len(prefixes) > 0 && turnEnd != "" {
			// Markers around the content (Command R7B's
			// <|START_RESPONSE|>…<|END_RESPONSE|>): the model writes them
			// around its answer, and they are no part of it.
			// A reasoning marker there is the closed block of a turn
			// without reasoning, which the parser reads itself.
			lead := strings.TrimSpace(contentLead(prefixes[0], withContent))
			if lead != "" && firstMarker(lead) == lead && !isThinkMarker(lead) {
				p.contentWrap = []string{lead, turnEnd}
			}
		}
	}
	cut := func(s string, prefixes []string) string {
		s = callText(s, prefixes, bases)
		if turnEnd != "" {
			s = strings.TrimSpace(strings.TrimSuffix(s, turnEnd))
		}
		return s
	}
	all := append(append([]string(nil), bases...), prefixes...)
	p.one, p.toolsShown = cut(one, all), strings.Contains(bases[0], "probe_arg")
	two, ok := withCalls(probeFnB, callA, callB)
	if ok {
		p.two = cut(two, all)
	} else {
		p.single = true
	}
	if alt := cut(one, empty); len(empty) > 0 && alt != p.one {
		// The generation prompt, and the content of a turn, begin with
		// the call text's start (Functionary v3.2's ">>>"): the call
		// against an empty turn alone is the other reading.
		a := p
		a.one, a.two = alt, ""
		if ok {
			a.two = cut(two, empty)
		}
		p.alt = &a
	}
	return p, strings.TrimSpace(p.one) != ""
}

// callText is what b has that none of the renderings without calls has:
// b without the longest prefix it shares with any of prefixes and the
// longest suffix it shares with any of suffixes, widened to whole
// markers, and without an empty reasoning block some templates write
// before calls (Command R7B).
func callText(b string, prefixes, suffixes []string) string {
	start, end := 0, len(b)
	for _, a := range prefixes {
		start = max(start, commonPrefix(a, b))
	}
	for _, a := range suffixes {
		end = min(end, len(b)-commonSuffix(a, b))
	}
	end = max(end, start)
	start, end = widen(b, start, end)
	text := strings.TrimSpace(b[start:end])
	for _, m := range knownThink {
		if rest, ok := strings.CutPrefix(text, m.open); ok {
			if rest, ok := strings.CutPrefix(strings.TrimLeft(rest, " \t\r\n"), m.close); ok {
				text = strings.TrimSpace(rest)
			}
		}
	}
	return text
}

// firstMarker is the marker s begins with, after whitespace: "<|eot_id|>"
// of "<|eot_id|>\n…"; "" when s begins with no <…> or […] marker.
func firstMarker(s string) string {
	s = strings.TrimLeft(s, " \t\r\n")
	if s == "" || s[0] != '<' && s[0] != '[' {
		return ""
	}
	close := map[byte]byte{'<': '>', '[': ']'}[s[0]]
	if i := strings.IndexByte(s, close); i > 0 && !strings.ContainsAny(s[:i], " \n") {
		return s[:i+1]
	}
	return ""
}

// insideMarker reports whether s ends inside a <…> or […] marker.
func insideMarker(s string) bool {
	return strings.LastIndexByte(s, '<') > strings.LastIndexByte(s, '>') ||
		strings.LastIndexByte(s, '[') > strings.LastIndexByte(s, ']')
}

// contentLead is what the template writes before an answer's content
// (Functionary v3.2's ">>>all\n"), "" for most: in a turn of content
// alone, the text between where an empty turn's rendering departs and
// the content.
func contentLead(empty, withContent string) string {
	i := strings.LastIndex(withContent, probeAnswer)
	n, _ := widen(withContent, commonPrefix(empty, withContent), 0)
	if i < 0 || n > i {
		return ""
	}
	return withContent[n:i]
}

func commonPrefix(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

func commonSuffix(a, b string) int {
	j := 0
	for j < len(a) && j < len(b) && a[len(a)-1-j] == b[len(b)-1-j] {
		j++
	}
	return j
}

// widen moves the cut points of b[start:end] out of the markers they fall
// in: a shared prefix can end inside one ("<|START_" of <|START_RESPONSE|>
// and <|START_ACTION|>), and a shared suffix begin inside one ("|>" of
// <|END_RESPONSE|> and <|END_ACTION|>).
func widen(b string, start, end int) (int, int) {
	for _, pair := range []string{"<>", "[]"} {
		open, close := pair[0], pair[1]
		if o := strings.LastIndexByte(b[:start], open); o >= 0 && o > strings.LastIndexByte(b[:start], close) {
			start = o
		}
		if o := strings.LastIndexByte(b[:end], open); o >= start && o > strings.LastIndexByte(b[:end], close) {
			if c := strings.IndexByte(b[end:], close); c >= 0 {
				end += c + 1
			}
		}
	}
	return start, end
}

// readings are the ways to read the probe, the likelier first: p, then
// p.alt when there is one.
func (p probe) readings() []probe {
	out := []probe{p}
	if p.alt != nil {
		out = append(out, *p.alt)
	}
	return out
}

// PromptLead is the call opener (or dropped marker) prompt ends with, ""
// for most templates: Functionary v3.2's generation prompt ends with
// ">>>", so the reply begins inside the marker. Pass it as Options.Lead.
func (f Format) PromptLead(prompt string) string {
	var best string
	for _, m := range append(f.CallOpeners(), f.drops...) {
		if m != "" && len(m) > len(best) && strings.HasSuffix(prompt, m) {
			best = m
		}
	}
	return best
}

func isThinkMarker(m string) bool {
	for _, k := range knownThink {
		if m == k.open || m == k.close {
			return true
		}
	}
	return false
}
