package reply

import (
	"fmt"
	"strings"

	"superfluid/grammar"
)

// namedJSON writes a call as markers around the tool's name and then its
// arguments as a JSON object: Functionary v3.1's
// <function=NAME>{…}</function>, v3.2's >>>NAME\n{…}, Mistral Small 3.2's
// [TOOL_CALLS]NAME[ARGS]{…}, Solar Open's
// <|tool_calls|><|tool_call:begin|>ID<|tool_call:name|>NAME<|tool_call:args|>{…}<|tool_call:end|><|calls|>.
type namedJSON struct {
	// begin and end enclose all the calls of a turn, when the template
	// has such a section; "" otherwise, and each call is a block.
	begin, end string
	// open starts a call; idSep, when the call carries an id before its
	// name, follows the id; sep follows the name; postID, when the id
	// comes after the name (Mistral Small 3.2's
	// [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{…}), follows the id; close follows
	// the arguments ("" when nothing does).
	open, idSep, sep, postID, close string
}

func (n *namedJSON) opener() string {
	if n.begin != "" {
		return n.begin
	}
	return n.open
}

func (n *namedJSON) openers() []opener { return []opener{{text: n.opener()}} }

func (n *namedJSON) markers() []string {
	var out []string
	for _, m := range []string{n.open, n.idSep, n.sep, n.postID, n.close, n.end} {
		if m != "" && m != n.opener() && strings.TrimSpace(m) != "" {
			out = append(out, m)
		}
	}
	return out
}

func (n *namedJSON) blockEnd(buf string, final bool) int {
	end, _, _ := n.scan(buf, final)
	return end
}

func (n *namedJSON) parse(block string) ([]ToolCall, error) {
	end, calls, err := n.scan(block, true)
	if err != nil {
		return nil, err
	}
	if end < 0 || strings.TrimSpace(block[end:]) != "" {
		return nil, fmt.Errorf("the call block does not end where its syntax does")
	}
	return calls, nil
}

// scan reads the block at the start of buf. end is its length, or -1
// while more text is needed (or, when final, when buf cannot be a block).
// A block that is certainly broken ends where it breaks, with err set, so
// that it is released as content at once.
func (n *namedJSON) scan(buf string, final bool) (end int, calls []ToolCall, err error) {
	more := func() (int, []ToolCall, error) {
		if final {
			return -1, nil, fmt.Errorf("the call block is cut short")
		}
		return -1, nil, nil
	}
	broken := func(at int, why string) (int, []ToolCall, error) {
		return max(at, 1), nil, fmt.Errorf("%s", why)
	}
	// upTo finds the marker m after pos; an unbounded field (an id, a
	// name) longer than 256 bytes is broken.
	upTo := func(pos int, m string) (int, bool) {
		i := strings.Index(buf[pos:], m)
		if i < 0 && len(buf)-pos > 256 {
			return -2, false
		}
		return i, i >= 0
	}
	pos := 0
	if n.begin != "" {
		pos = len(n.begin)
	}
	for {
		at := skipSpace(buf, pos)
		if at == len(buf) && !final {
			return more()
		}
		full, partial := hasPrefixOrIsPrefix(buf[at:], n.open)
		if partial && !final {
			return more()
		}
		if !full {
			if len(calls) == 0 {
				return broken(at, "no call follows the opener")
			}
			if n.end == "" {
				return pos, calls, nil
			}
			full, partial = hasPrefixOrIsPrefix(buf[at:], n.end)
			switch {
			case full:
				return at + len(n.end), calls, nil
			case partial && !final:
				return more()
			}
			// The model went on without the section's end.
			return pos, calls, nil
		}
		pos = at + len(n.open)
		var c ToolCall
		if n.idSep != "" {
			i, ok := upTo(pos, n.idSep)
			if !ok {
				if i == -2 {
					return broken(pos, "the call's id does not end")
				}
				return more()
			}
			c.ID, pos = strings.TrimSpace(buf[pos:pos+i]), pos+i+len(n.idSep)
		}
		i, ok := upTo(pos, n.sep)
		// With the id after the name, the model may leave the id out:
		// the name then ends at the id's end marker.
		skipID := false
		if n.postID != "" {
			if k, found := upTo(pos, n.postID); found && (!ok || k < i) {
				i, ok, skipID = k, true, true
			}
		}
		if !ok {
			if i == -2 {
				return broken(pos, "the call's name does not end")
			}
			return more()
		}
		end := n.sep
		if skipID {
			end = n.postID
		}
		c.Name, pos = strings.TrimSpace(buf[pos:pos+i]), pos+i+len(end)
		if c.Name == "" || strings.ContainsAny(c.Name, " \t\r\n{}<>\"'") {
			return broken(pos, fmt.Sprintf("%q is not a tool name", c.Name))
		}
		if n.postID != "" && !skipID {
			i, ok := upTo(pos, n.postID)
			if !ok {
				if i == -2 {
					return broken(pos, "the call's id does not end")
				}
				return more()
			}
			c.ID, pos = strings.TrimSpace(buf[pos:pos+i]), pos+i+len(n.postID)
		}
		e := jsonEnd(buf, pos)
		switch {
		case e == -2:
			return broken(pos, fmt.Sprintf("the arguments of %q are not an object", c.Name))
		case e < 0:
			return more()
		}
		if c.Arguments, err = looseObject(buf[pos:e]); err != nil {
			return broken(e, fmt.Sprintf("call %q: %v", c.Name, err))
		}
		pos = e
		calls = append(calls, c)
		if n.close != "" {
			at := skipSpace(buf, pos)
			full, partial := hasPrefixOrIsPrefix(buf[at:], n.close)
			switch {
			case full:
				pos = at + len(n.close)
			case partial && !final:
				return more()
			}
		}
		if n.begin == "" {
			return pos, calls, nil
		}
	}
}

// looseObject reads arguments as JSON, or as the Python dict some
// templates print them as (Functionary v3.2) and models then imitate.
func looseObject(text string) ([]byte, error) {
	if args, err := argumentsObject([]byte(text)); err == nil {
		return args, nil
	}
	v, err := pyLiteral(text)
	if err != nil {
		return nil, fmt.Errorf("the arguments are neither JSON nor a Python dict")
	}
	return argumentsObject(v)
}

func (n *namedJSON) grammar(tools []Tool, parallel bool, root string) (string, error) {
	return n.grammarAfter("", tools, parallel, root)
}

// grammarAfter is the grammar of a reply that follows lead, the opener a
// generation prompt ended with (Functionary v3.2's ">>>"): the first call
// then starts after its opener.
func (n *namedJSON) grammarAfter(lead string, tools []Tool, parallel bool, root string) (string, error) {
	if len(tools) == 0 {
		return "", fmt.Errorf("no tools to call")
	}
	var b strings.Builder
	var alts []string
	for i, t := range tools {
		params := t.Parameters
		if len(strings.TrimSpace(string(params))) == 0 {
			params = []byte(`{"type":"object"}`)
		}
		args, rules, err := schemaRules(params, fmt.Sprintf("%s-args%d", root, i))
		if err != nil {
			return "", fmt.Errorf("tool %q: %w", t.Name, err)
		}
		b.WriteString(rules)
		var call string
		if n.idSep != "" {
			call += `[a-zA-Z0-9]{9} ` + grammar.Literal(n.idSep) + " "
		}
		call += grammar.Literal(t.Name) + " " + grammar.Literal(n.sep) + " "
		if n.postID != "" {
			call += `[a-zA-Z0-9]{9} ` + grammar.Literal(n.postID) + " "
		}
		call += args
		if n.close != "" {
			call += " " + grammar.Literal(n.close)
		}
		alts = append(alts, call)
	}
	bare, call := root+"-bare", root+"-call"
	fmt.Fprintf(&b, "%s ::= %s\n", bare, strings.Join(alts, " | "))
	fmt.Fprintf(&b, "%s ::= %s %s\n", call, grammar.Literal(n.open), bare)
	first := call
	if lead != "" && lead == n.open && n.begin == "" {
		first = bare
	}
	calls := first
	if parallel {
		calls = fmt.Sprintf("%s ( \"\\n\"? %s )*", first, call)
	}
	body := calls
	if n.begin != "" {
		body = grammar.Literal(n.begin) + " " + calls
		if n.end != "" {
			body += " " + grammar.Literal(n.end)
		}
	}
	return fmt.Sprintf("%s ::= %s\n%s", root, body, b.String()), nil
}
