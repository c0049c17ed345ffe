package grammar

// expansionDepthWithin checks how deep llama.cpp's matcher recurses when
// it advances a parse to the next character. To advance, it replaces a
// rule reference at the top of a stack by each of the rule's alternatives
// and recurses while the top is again a reference; an empty alternative
// pops, and the recursion goes on with what followed the reference. So
// the depth is the number of rules expanded along the deepest such path,
// and the rules a path passes through that derive nothing add theirs in
// turn: through "a ::= b b", "b ::= c c" … a few rules make a path
// exponentially long. The depth is reckoned for every rule and every
// position an advance can start from (after each character of an
// alternative), capped at limit+1 so that the sums stay small; ok is false,
// naming a rule, when one passes limit. order lists the nonterminals each
// after those at its left edge (leftRecursive's order).
//
// through[r] is the deepest path from an expansion of r that reaches a
// character inside r's derivation (a path may pass through empty rules);
// empty[r], for a nullable r, the deepest path that expands r to nothing.
func (g *Grammar) expansionDepthWithin(order []int, limit int) (int, bool) {
	cap := limit + 1
	add := func(a, b int) int { return min(a+b, cap) }
	through := make([]int, len(g.names))
	empty := make([]int, len(g.names))
	for _, r := range order {
		deepest, emptiest := 0, -1
		for _, pi := range g.byLHS[r] {
			rhs := g.prods[pi].rhs
			before, best, allEmpty := 0, 0, true // before: the empty rules passed so far
			for _, s := range rhs {
				if s.nt < 0 {
					allEmpty = false
					break
				}
				best = max(best, add(before, through[s.nt]))
				if !g.nullable[s.nt] {
					allEmpty = false
					break
				}
				before = add(before, empty[s.nt])
			}
			deepest = max(deepest, best, before)
			if allEmpty {
				emptiest = max(emptiest, before)
			}
		}
		through[r] = add(1, deepest)
		if emptiest >= 0 {
			empty[r] = add(1, emptiest)
		}
		if through[r] > limit {
			return r, false
		}
	}
	// After a character the advance starts at the next position of an
	// alternative: from each position, backwards, the deepest path on.
	for _, pr := range g.prods {
		on := 0
		for i := len(pr.rhs) - 1; i >= 0; i-- {
			s := pr.rhs[i]
			switch {
			case s.nt < 0:
				on = 0
			case g.nullable[s.nt]:
				on = max(through[s.nt], add(empty[s.nt], on))
			default:
				on = through[s.nt]
			}
			if on > limit {
				return pr.lhs, false
			}
		}
	}
	return 0, true
}
