package grammar

import "sort"

// keyExcluding is a JSON string key, with its quotes, that is none of names.
// Keys are held to canonical spelling (key-char: one escape per character),
// so "not this name" is a property of the text: a trie of the names where
// every node may close the string (unless a name ends there) or leave the
// trie by a character no name continues with.
func (e *emitter) keyExcluding(names []string, path string) string {
	if len(names) == 0 {
		return e.base("string")
	}
	root := &trieNode{}
	for _, n := range names {
		node := root
		for _, r := range n {
			u := jsonCharText(r)
			if node.next == nil {
				node.next = map[string]*trieNode{}
			}
			if node.next[u] == nil {
				node.next[u] = &trieNode{}
			}
			node = node.next[u]
		}
		node.end = true
	}
	e.base("key-char")
	return seq(`"\""`, e.trieRule(root, path))
}

type trieNode struct {
	next map[string]*trieNode
	end  bool
}

func (e *emitter) trieRule(n *trieNode, path string) string {
	var alts []string
	if !n.end {
		alts = append(alts, `"\""`)
	}
	units := make([]string, 0, len(n.next))
	for u := range n.next {
		units = append(units, u)
	}
	sort.Strings(units)
	var raw []rrange
	escaped := map[string]bool{}
	for _, u := range units {
		alts = append(alts, lit(u)+" "+e.trieRule(n.next[u], path))
		if u[0] == '\\' {
			escaped[u] = true
		} else {
			r := []rune(u)[0]
			raw = append(raw, rrange{r, r})
		}
	}
	// leaving the trie: any unit no name continues with, then anything
	other := []string{class(append([]rrange{{'"', '"'}, {'\\', '\\'}, {0, 0x1f}}, raw...), true)}
	if len(escaped) == 0 {
		other = append(other, `"\\" ["\\bfnrt]`, `"\\u00" ( "0" [0-7bef] | "1" [0-9a-f] )`)
	} else {
		for _, r := range escapedRunes() {
			if u := jsonCharText(r); !escaped[u] {
				other = append(other, lit(u))
			}
		}
	}
	leave := "( " + joinAlts(other) + " ) key-char* " + `"\""`
	alts = append(alts, leave)
	return e.rule(path+"-key", "( "+joinAlts(alts)+" )")
}

func joinAlts(alts []string) string {
	out := ""
	for i, a := range alts {
		if i > 0 {
			out += " | "
		}
		out += a
	}
	return out
}

// escapedRunes are the characters canonical JSON writes as an escape.
func escapedRunes() []rune {
	rs := []rune{'"', '\\'}
	for r := rune(0); r < 0x20; r++ {
		rs = append(rs, r)
	}
	return rs
}
