package sched

import (
	"superfluid/engine"
)

// Cache namespaces: the prefix cache keys a stream computed under a LoRA
// adapter set in the set's namespace ns, its tokens reaching the cache as
// -(1 + token + vocab × ns): negative, which no vocabulary's token is,
// one-to-one within a set, disjoint between sets and from the base
// model's streams, and above the media key tokens (media.go); an image's
// key tokens move into the namespace's own range of the media keys. A
// stream's first token therefore says its namespace.
//
// A set is named by engine.AdapterSetOf — its adapters' file digests and
// scales — not by this process: the name is what a park file records
// (kv, park), and a namespace names at most one set at a time. At start-up
// each set with parked streams takes back the namespace its files were
// keyed in (the most recently used set first when two claim one), so a
// restart with the same --lora files and scales resumes warm, while a
// file whose namespace now names another set is never restored (kv checks
// the file's set against the namespace's).
//
// maxCacheNamespaces bounds the table (and what int32 holds at a large
// vocabulary bounds it further). Past it, a new set takes the namespace of
// the least recently used set no job holds: that set's cached streams —
// resident, in host memory, parked — are dropped first (a scale is a
// request's choice, so a client sweeping scales must not fill the table
// for the process's life, nor make every later set run cold). A job holds
// its namespace from its first admission until it ends; a lane's stream
// released after its namespace changed hands is discarded, not published.
// Only when every namespace is held does a new set run cold, its streams
// discarded.

// maxCacheNamespaces bounds the namespaces the table numbers: enough for
// every set a server's lanes and queue hold at once in practice, few
// enough that the media key space (media.go) divides among them with
// millions of keys each.
const maxCacheNamespaces = 256

// namespace is one slot of the table.
type namespace struct {
	bound bool
	set   engine.AdapterSetID
	used  uint64 // the table's clock when a job last took it; 0: only parked
	held  int    // jobs that took it and have not ended
}

// cacheNamespaces numbers adapter sets for the prefix cache.
type cacheNamespaces struct {
	vocab int64
	max   int32
	slots []namespace
	ids   map[engine.AdapterSetID]int32
	clock uint64
	// files are the engine's adapters' digests, what sets are named by.
	files []string
	// drop empties a namespace in the cache before it changes hands; nil
	// when the cache cannot, and then a full table gives no namespace.
	drop func(ns int32)
}

func newCacheNamespaces(vocab int) cacheNamespaces {
	v := int64(max(vocab, 1))
	// -(1 + t + v×ns) > -mediaKeyBase for every t < v: tags stay above
	// media key tokens (media.go).
	fit := (int64(mediaKeyBase) - 1 - v) / v
	n := int32(min(maxCacheNamespaces, max(fit, 0)))
	return cacheNamespaces{vocab: v, max: n, slots: make([]namespace, n), ids: map[engine.AdapterSetID]int32{}}
}

// of is the namespace of the set with scales, taken by a job (held until
// release); false when every namespace is held.
func (c *cacheNamespaces) of(scales []float32) (int32, bool) {
	set := engine.AdapterSetOf(c.files, scales)
	c.clock++
	ns, ok := c.ids[set]
	if !ok {
		if ns, ok = c.claim(); !ok {
			return -1, false
		}
		c.bind(ns, set)
	}
	s := &c.slots[ns]
	s.used = c.clock
	s.held++
	return ns, true
}

// claim picks a namespace for a new set: one never given, else the least
// recently used one no job holds, emptied in the cache.
func (c *cacheNamespaces) claim() (int32, bool) {
	victim := int32(-1)
	for i := range c.max {
		s := &c.slots[i]
		if !s.bound {
			return i, true
		}
		if s.held == 0 && c.drop != nil && (victim < 0 || s.used < c.slots[victim].used) {
			victim = i
		}
	}
	if victim < 0 {
		return -1, false
	}
	c.drop(victim)
	delete(c.ids, c.slots[victim].set)
	c.slots[victim] = namespace{}
	return victim, true
}

func (c *cacheNamespaces) bind(ns int32, set engine.AdapterSetID) {
	c.slots[ns] = namespace{bound: true, set: set}
	c.ids[set] = ns
}

// release ends a job's hold on ns.
func (c *cacheNamespaces) release(ns int32) {
	if ns >= 0 && ns < int32(len(c.slots)) && c.slots[ns].held > 0 {
		c.slots[ns].held--
	}
}

// names reports whether ns still names set.
func (c *cacheNamespaces) names(ns int32, set engine.AdapterSetID) bool {
	return ns >= 0 && ns < int32(len(c.slots)) && c.slots[ns].bound && c.slots[ns].set == set
}

// nsOf is the namespace a cache token is keyed in; -1 for the base model.
func (c *cacheNamespaces) nsOf(t engine.Token) int64 {
	switch {
	case t >= 0:
		return -1
	case int64(t) <= -mediaKeyBase:
		return (-int64(t)-mediaKeyBase)/mediaKeyRange - 1
	}
	return (-int64(t) - 1) / c.vocab
}

// setOf is the set whose namespace a stream beginning with first is keyed
// in (kv asks, to park and restore): the base model's for a vocabulary or
// media token; false for a namespace naming no set.
func (c *cacheNamespaces) setOf(first engine.Token) (engine.AdapterSetID, bool) {
	ns := c.nsOf(first)
	if ns < 0 {
		return engine.AdapterSetID{}, true
	}
	if ns >= int64(len(c.slots)) || !c.slots[ns].bound {
		return engine.AdapterSetID{}, false
	}
	return c.slots[ns].set, true
}

// reserve gives set, found parked with a stream beginning with first, the
// namespace that token is in, unless that namespace or the set is taken
// (by a set more recently used: the cache lists them so).
func (c *cacheNamespaces) reserve(set engine.AdapterSetID, first engine.Token) {
	ns := c.nsOf(first)
	if ns < 0 || ns >= int64(len(c.slots)) || c.slots[ns].bound || set.IsBase() {
		return
	}
	if _, taken := c.ids[set]; taken {
		return
	}
	c.bind(int32(ns), set)
}

// tag is tokens as the cache sees them in namespace ns: a vocabulary
// token tagged, an image's key token (media.go, in the base model's range)
// moved into ns's range of the media keys.
func (c *cacheNamespaces) tag(ns int32, tokens []engine.Token) []engine.Token {
	out := make([]engine.Token, len(tokens))
	base := 1 + c.vocab*int64(ns)
	shift := (1 + int64(ns)) * mediaKeyRange
	for i, t := range tokens {
		if int64(t) <= -mediaKeyBase {
			out[i] = engine.Token(int64(t) - shift)
			continue
		}
		out[i] = engine.Token(-(base + int64(t)))
	}
	return out
}

// NamespacedCache is a Cache that parks and drops streams by adapter set
// namespace (package kv's does); without it the scheduler never gives a
// namespace away, and a set past the table runs cold.
type NamespacedCache interface {
	// UseNamespaces gives the cache the table's setOf.
	UseNamespaces(setOf func(first engine.Token) (engine.AdapterSetID, bool))
	// EachParkedSet lists the sets of parked streams with a stream's first
	// token, most recently used first.
	EachParkedSet(f func(set engine.AdapterSetID, first engine.Token))
	// DropNamespace drops every cached stream whose first token in
	// selects.
	DropNamespace(in func(first engine.Token) bool)
}

// useCache wires the table to a cache that parks by namespace: the sets
// found parked take back their namespaces.
func (c *cacheNamespaces) useCache(cache Cache, files []string) {
	c.files = files
	nc, ok := cache.(NamespacedCache)
	if !ok {
		return
	}
	nc.UseNamespaces(c.setOf)
	nc.EachParkedSet(c.reserve)
	c.drop = func(ns int32) {
		nc.DropNamespace(func(first engine.Token) bool { return c.nsOf(first) == int64(ns) })
	}
}

// cacheKey is j's prompt as the cache sees it: in its set's namespace,
// taken on the job's first admission; false when none could be had.
func (p *planner) cacheKey(j *job) ([]engine.Token, bool) {
	if j.cacheNS < 0 {
		ns, ok := p.cacheNS.of(j.adapters.scales)
		if !ok {
			return nil, false
		}
		j.cacheNS, j.cacheSet = ns, p.cacheNS.slots[ns].set
	}
	return p.cacheNS.tag(j.cacheNS, j.prompt), true
}

// releaseOf is seq given back holding tokens (j's): published in the base
// namespace, in j's set's, or discarded when the set has none.
func (p *planner) releaseOf(j *job, seq int32, tokens []engine.Token) release {
	switch {
	case j.adapters.none():
		return release{seq: seq, tokens: tokens, ns: -1}
	case j.cacheNS >= 0:
		return release{seq: seq, tokens: p.cacheNS.tag(j.cacheNS, tokens), ns: j.cacheNS, set: j.cacheSet}
	}
	return release{seq: seq, discard: true, ns: -1}
}
