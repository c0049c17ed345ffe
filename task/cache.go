package task

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"superfluid/engine"
	"superfluid/sched"
)

// CompletionCache answers identical greedy FIM requests without running
// them again: editors re-ask for the same completion as the cursor
// returns to where it was. Every FIM route consults it with CacheKey's
// one rule; an API renders a hit as it renders a finished generation.
type CompletionCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // front: most recent
	items map[string]*list.Element
}

// Cached is a finished generation as the cache keeps it. Finish is worded
// as the API that stored it words it: keys carry the API, so each reads
// back only its own entries.
type Cached struct {
	Key      string
	Text     string
	Tokens   int
	Finish   string
	StopWord string
}

// NewCompletionCache keeps up to size answers; 0 keeps none.
func NewCompletionCache(size int) *CompletionCache {
	return &CompletionCache{size: size, order: list.New(), items: map[string]*list.Element{}}
}

// Get is the answer under key, if the cache holds it.
func (c *CompletionCache) Get(key string) (Cached, bool) {
	if c.size <= 0 {
		return Cached{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return Cached{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(Cached), true
}

// Put keeps v under v.Key, dropping the least recently used answer past
// the size.
func (c *CompletionCache) Put(v Cached) {
	if c.size <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[v.Key]; ok {
		el.Value = v
		c.order.MoveToFront(el)
		return
	}
	c.items[v.Key] = c.order.PushFront(v)
	for c.order.Len() > c.size {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(Cached).Key)
	}
}

// CacheKey is the one rule of every FIM route: the completion cache's key
// for s on m, or "" when s's answer may not come from the cache. Only a
// greedy FIM generation without logprobs qualifies (nothing else is
// reproducible, and the cache keeps text, not tokens); everything that
// changes a greedy answer is in the key — the model, the prompt, the
// limit, the stops, the sampling but its seed, the bias, the grammar —
// with api, which names the API and anything of its own that shapes the
// text (llama.cpp's n_indent). What an API cannot answer from text alone
// (a stream, token ids) it leaves out before asking.
func CacheKey(m *Model, s *Spec, api string) string {
	smp := s.Sampling
	if s.Class != sched.FIM || s.Logprobs != 0 || smp.Temperature > 0 || s.Media != nil {
		return "" // an image's placeholders are not its content
	}
	if r, ok := m.Sched.(ClassRefuser); ok && r.RefusesClass(s.Class) {
		return "" // the scheduler's refusal is the answer, not another's cached one
	}
	smp.Seed = 0
	// The scales resolved now: a POST /lora-adapters between this key and
	// the submission could store one answer under the other's key, a race
	// no client's request sequence can make matter.
	extra := fmt.Sprintf("%s|%+v|%v|lora%v", api, smp, s.Bias, m.LoRA.Resolve(s.LoRA)) + GrammarKey(s.Grammar)
	return completionKey(m.Desc.Identity, s.Prompt, s.MaxTokens, s.Stop, extra)
}

// completionKey hashes what identifies a greedy completion.
func completionKey(model string, prompt []engine.Token, maxTokens int, stops []string, extra string) string {
	h := sha256.New()
	h.Write([]byte(model))
	h.Write([]byte{0})
	var b [4]byte
	for _, t := range prompt {
		binary.LittleEndian.PutUint32(b[:], uint32(t))
		h.Write(b[:])
	}
	binary.LittleEndian.PutUint32(b[:], uint32(maxTokens))
	h.Write(b[:])
	h.Write([]byte(strings.Join(stops, "\x00")))
	h.Write([]byte{0})
	h.Write([]byte(extra))
	return hex.EncodeToString(h.Sum(nil))
}

// GrammarKey is what of a grammar tells answers apart in a cache key.
func GrammarKey(g *engine.GrammarSpec) string {
	if g == nil {
		return ""
	}
	return fmt.Sprintf("|grammar=%q|root=%q|lazy=%v|%q|%v", g.GBNF, g.Root, g.Lazy, g.TriggerPatterns, g.TriggerTokens)
}
