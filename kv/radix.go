package kv

import "superfluid/engine"

// node is a radix-tree node: the edge into it is a run of tokens, and the
// path from the root spells a token prefix.
type node struct {
	edge     []engine.Token
	parent   *node
	children map[engine.Token]*node
	depth    int // tokens from the root to the end of edge

	// resident, host and park name entries whose stream ends exactly here.
	resident *entry
	host     *hostEntry
	park     *parkEntry
	// hits counts acquisitions whose match covered this whole node.
	hits int
}

// radix indexes token streams.
type radix struct {
	root node
}

// match walks tokens down the tree and returns the deepest node it enters
// and how many tokens matched (which may end inside that node's edge).
func (r *radix) match(tokens []engine.Token) (*node, int) {
	n, matched := &r.root, 0
	for matched < len(tokens) {
		child := n.children[tokens[matched]]
		if child == nil {
			return n, matched
		}
		k := commonPrefix(child.edge, tokens[matched:])
		matched += k
		n = child
		if k < len(child.edge) {
			return n, matched
		}
	}
	return n, matched
}

// insert returns the node whose path is exactly tokens, splitting an edge
// or adding a leaf as needed.
func (r *radix) insert(tokens []engine.Token) *node {
	n, matched := &r.root, 0
	for matched < len(tokens) {
		child := n.children[tokens[matched]]
		if child == nil {
			leaf := &node{edge: tokens[matched:], parent: n, depth: len(tokens)}
			if n.children == nil {
				n.children = map[engine.Token]*node{}
			}
			n.children[tokens[matched]] = leaf
			return leaf
		}
		k := commonPrefix(child.edge, tokens[matched:])
		if k < len(child.edge) {
			child = r.split(child, k)
		}
		matched += k
		n = child
	}
	return n
}

// split cuts n's edge after k tokens, inserting a node for the first part.
func (r *radix) split(n *node, k int) *node {
	mid := &node{
		edge:     n.edge[:k:k],
		parent:   n.parent,
		depth:    n.depth - len(n.edge) + k,
		children: map[engine.Token]*node{n.edge[k]: n},
		hits:     n.hits,
	}
	n.parent.children[n.edge[0]] = mid
	n.edge = n.edge[k:]
	n.parent = mid
	return mid
}

// prune removes n and its ancestors while they name nothing and lead nowhere.
func (r *radix) prune(n *node) {
	for n != &r.root && n.resident == nil && n.host == nil && n.park == nil && len(n.children) == 0 {
		p := n.parent
		delete(p.children, n.edge[0])
		n = p
	}
}

// path returns the tokens from the root to n.
func (n *node) path() []engine.Token {
	out := make([]engine.Token, n.depth)
	for at := n; at.parent != nil; at = at.parent {
		copy(out[at.depth-len(at.edge):at.depth], at.edge)
	}
	return out
}

// find returns the most recently used resident, host and parked entries
// at or below n, leaving out those tried (already found unable to seed
// this prompt); usable says which parked entries may be restored,
// hostUsable which host entries.
func (n *node) find(usable func(*parkEntry) bool, hostUsable func(*hostEntry) bool, tried map[any]bool) (*entry, *hostEntry, *parkEntry) {
	var best *entry
	var bestHost *hostEntry
	var bestPark *parkEntry
	var walk func(*node)
	walk = func(at *node) {
		if e := at.resident; e != nil && !tried[e] && (best == nil || e.used > best.used) {
			best = e
		}
		if h := at.host; h != nil && !tried[h] && (bestHost == nil || h.used > bestHost.used) && hostUsable(h) {
			bestHost = h
		}
		if p := at.park; p != nil && !tried[p] && usable(p) && (bestPark == nil || p.used > bestPark.used) {
			bestPark = p
		}
		for _, c := range at.children {
			walk(c)
		}
	}
	walk(n)
	return best, bestHost, bestPark
}

// coveredBelow reports whether some resident entry other than skip passes
// through or ends at n.
func (n *node) coveredBelow(skip *entry) bool {
	if n.resident != nil && n.resident != skip {
		return true
	}
	for _, c := range n.children {
		if c.coveredBelow(skip) {
			return true
		}
	}
	return false
}

func commonPrefix(a, b []engine.Token) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
