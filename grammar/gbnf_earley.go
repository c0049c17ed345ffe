package grammar

// Accepts reports whether the whole of s is a sentence of the grammar's
// root rule. It is an Earley recognizer (with Aycock and Horspool's handling
// of nullable rules), so ambiguous and recursive grammars are fine; it costs
// O(n³) at worst and is meant as an oracle, not a sampler.
func (g *Grammar) Accepts(s string) bool {
	in := []rune(s)
	r := &earley{g: g, sets: make([]earleySet, len(in)+1)}
	for _, pi := range g.byLHS[g.root] {
		r.add(0, item{prod: pi, dot: 0, origin: 0})
	}
	for i := 0; i <= len(in); i++ {
		set := &r.sets[i]
		for k := 0; k < len(set.items); k++ {
			it := set.items[k]
			rhs := g.prods[it.prod].rhs
			if it.dot < len(rhs) {
				sym := rhs[it.dot]
				if sym.nt >= 0 {
					r.predict(i, it, sym.nt)
				} else if i < len(in) && sym.cls.matches(in[i]) {
					r.add(i+1, item{prod: it.prod, dot: it.dot + 1, origin: it.origin})
				}
				continue
			}
			lhs := g.prods[it.prod].lhs
			for _, w := range r.sets[it.origin].waiting[lhs] {
				r.add(i, item{prod: w.prod, dot: w.dot + 1, origin: w.origin})
			}
		}
		if len(set.items) == 0 {
			return false // nothing can continue: the prefix is already refused
		}
	}
	for _, it := range r.sets[len(in)].items {
		pr := g.prods[it.prod]
		if pr.lhs == g.root && it.origin == 0 && it.dot == len(pr.rhs) {
			return true
		}
	}
	return false
}

type item struct {
	prod, dot, origin int
}

type earleySet struct {
	items   []item
	seen    map[item]bool
	waiting map[int][]item // items whose next symbol is the nonterminal
}

type earley struct {
	g    *Grammar
	sets []earleySet
}

func (r *earley) add(i int, it item) {
	set := &r.sets[i]
	if set.seen == nil {
		set.seen = map[item]bool{}
		set.waiting = map[int][]item{}
	}
	if set.seen[it] {
		return
	}
	set.seen[it] = true
	set.items = append(set.items, it)
	if rhs := r.g.prods[it.prod].rhs; it.dot < len(rhs) && rhs[it.dot].nt >= 0 {
		nt := rhs[it.dot].nt
		set.waiting[nt] = append(set.waiting[nt], it)
	}
}

func (r *earley) predict(i int, it item, nt int) {
	for _, pi := range r.g.byLHS[nt] {
		r.add(i, item{prod: pi, dot: 0, origin: i})
	}
	if r.g.nullable[nt] {
		r.add(i, item{prod: it.prod, dot: it.dot + 1, origin: it.origin})
	}
}
