package grammar

import (
	"sort"
	"strings"
)

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
				e.cv.work.spend(trieNodeCost)
				node.next[u] = &trieNode{}
			}
			node = node.next[u]
		}
		node.end = true
	}
	e.base("key-char")
	return seq(`"\""`, e.trieRules(root, path))
}

// trieNodeCost is a trie node's memory with its map and its stack frame.
const trieNodeCost = 512

type trieNode struct {
	next map[string]*trieNode
	end  bool
	rule string // the node's rule, once written
}

// trieRules writes a rule per trie node, children before their parent,
// and returns the root's. The walk keeps its own stack: a trie is as deep
// as the longest name, and a name can be as long as the schema.
func (e *emitter) trieRules(root *trieNode, path string) string {
	type frame struct {
		n     *trieNode
		units []string
		next  int
	}
	open := func(n *trieNode) frame {
		units := make([]string, 0, len(n.next))
		for u := range n.next {
			units = append(units, u)
		}
		sort.Strings(units)
		return frame{n: n, units: units}
	}
	stack := []frame{open(root)}
	for {
		top := &stack[len(stack)-1]
		if top.next < len(top.units) {
			child := top.n.next[top.units[top.next]]
			top.next++
			stack = append(stack, open(child))
			continue
		}
		top.n.rule = e.trieRule(top.n, top.units, path)
		if len(stack) == 1 {
			return root.rule
		}
		stack = stack[:len(stack)-1]
	}
}

// trieRule is node n's rule, its children's rules written: the key may
// close here, go on into a child, or leave the trie.
func (e *emitter) trieRule(n *trieNode, units []string, path string) string {
	var alts []string
	if !n.end {
		alts = append(alts, `"\""`)
	}
	var raw []rrange
	escaped := map[string]bool{}
	for _, u := range units {
		alts = append(alts, lit(u)+" "+n.next[u].rule)
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
	leave := "( " + strings.Join(other, " | ") + " ) key-char* " + `"\""`
	alts = append(alts, leave)
	return e.rule(path+"-key", "( "+strings.Join(alts, " | ")+" )")
}

// escapedRunes are the characters canonical JSON writes as an escape.
func escapedRunes() []rune {
	rs := []rune{'"', '\\'}
	for r := rune(0); r < 0x20; r++ {
		rs = append(rs, r)
	}
	return rs
}
