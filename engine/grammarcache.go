package engine

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// GrammarCache keeps compiled grammars by the digest of their spec, with a
// reference count per entry: an entry in use is never dropped, and the
// unused ones stay, least recently used first out, up to a bound. It is
// the Grammars implementation engines share; compile and free are the
// engine's own. Safe from any goroutine.
type GrammarCache struct {
	compile func(g *GrammarSpec) (GrammarID, error)
	free    func(id GrammarID)
	maxIdle int

	mu     sync.Mutex
	byKey  map[[32]byte]*grammarEntry
	byID   map[GrammarID]*grammarEntry
	idle   *list.List // unreferenced entries, most recently released first
	closed bool

	compiles, hits int
}

type grammarEntry struct {
	key  [32]byte
	id   GrammarID
	err  error
	refs int
	done chan struct{} // closed once compiled (or failed)
	elem *list.Element // in idle while refs == 0
}

// DefaultIdleGrammars is how many unreferenced grammars a cache keeps.
const DefaultIdleGrammars = 64

// NewGrammarCache makes a cache over an engine's compile and free; maxIdle
// ≤ 0 means DefaultIdleGrammars.
func NewGrammarCache(compile func(*GrammarSpec) (GrammarID, error), free func(GrammarID), maxIdle int) *GrammarCache {
	if maxIdle <= 0 {
		maxIdle = DefaultIdleGrammars
	}
	return &GrammarCache{
		compile: compile, free: free, maxIdle: maxIdle,
		byKey: map[[32]byte]*grammarEntry{}, byID: map[GrammarID]*grammarEntry{}, idle: list.New(),
	}
}

// GrammarDigest identifies a spec: two specs with the same digest compile
// to the same grammar.
func GrammarDigest(g *GrammarSpec) [32]byte {
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(g.GBNF)
	root := g.Root
	if root == "" {
		root = "root"
	}
	field(root)
	if g.Lazy {
		field("lazy")
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(g.TriggerPatterns)))
		h.Write(n[:])
		for _, p := range g.TriggerPatterns {
			field(p)
		}
		binary.LittleEndian.PutUint64(n[:], uint64(len(g.TriggerTokens)))
		h.Write(n[:])
		for _, t := range g.TriggerTokens {
			binary.LittleEndian.PutUint32(n[:4], uint32(t))
			h.Write(n[:4])
		}
	} else {
		field("eager")
		// Triggers on an eager grammar are refused; keep them in the key
		// so such a spec never hits a cached eager grammar.
		for _, p := range g.TriggerPatterns {
			field(p)
		}
		for range g.TriggerTokens {
			field("token")
		}
	}
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// AcquireGrammar implements Grammars.
func (c *GrammarCache) AcquireGrammar(g *GrammarSpec) (GrammarID, error) {
	if g == nil {
		return 0, &Error{Status: StatusGrammar, Op: "grammar", Msg: "no grammar"}
	}
	key := GrammarDigest(g)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, &Error{Status: StatusClosed, Op: "grammar", Msg: "the engine is closed"}
	}
	if e := c.byKey[key]; e != nil {
		c.hits++
		c.ref(e)
		c.mu.Unlock()
		<-e.done
		if e.err != nil {
			c.mu.Lock()
			e.refs--
			c.mu.Unlock()
			return 0, e.err
		}
		return e.id, nil
	}
	c.compiles++
	e := &grammarEntry{key: key, refs: 1, done: make(chan struct{})}
	c.byKey[key] = e
	c.mu.Unlock()

	id, err := c.compile(g)
	c.mu.Lock()
	defer c.mu.Unlock()
	defer close(e.done)
	if err != nil {
		e.err = err
		e.refs--
		delete(c.byKey, key)
		return 0, err
	}
	e.id = id
	if c.closed {
		// Close ran while this compiled: nobody will free it later.
		delete(c.byKey, key)
		c.free(id)
		e.err = &Error{Status: StatusClosed, Op: "grammar", Msg: "the engine is closed"}
		return 0, e.err
	}
	c.byID[id] = e
	return id, nil
}

// ref takes a reference to e, taking it off the idle list.
func (c *GrammarCache) ref(e *grammarEntry) {
	e.refs++
	if e.elem != nil {
		c.idle.Remove(e.elem)
		e.elem = nil
	}
}

// ReleaseGrammar implements Grammars. Releasing an id that holds no
// reference does nothing.
func (c *GrammarCache) ReleaseGrammar(id GrammarID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.byID[id]
	if e == nil || e.refs == 0 {
		return
	}
	e.refs--
	if e.refs > 0 {
		return
	}
	e.elem = c.idle.PushFront(e)
	for c.idle.Len() > c.maxIdle {
		old := c.idle.Remove(c.idle.Back()).(*grammarEntry)
		old.elem = nil
		delete(c.byKey, old.key)
		delete(c.byID, old.id)
		if !c.closed {
			c.free(old.id)
		}
	}
}

// Known reports whether id names a compiled grammar in the cache.
func (c *GrammarCache) Known(id GrammarID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byID[id] != nil
}

// Counts reports how many acquisitions compiled and how many found the
// grammar compiled (or compiling).
func (c *GrammarCache) Counts() (compiles, hits int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.compiles, c.hits
}

// Idle is how many unreferenced grammars the cache keeps.
func (c *GrammarCache) Idle() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idle.Len()
}

// Close forgets every entry without freeing it (the engine frees all its
// grammars as it closes); later acquisitions fail with ErrClosed.
func (c *GrammarCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	clear(c.byKey)
	clear(c.byID)
	c.idle.Init()
}
