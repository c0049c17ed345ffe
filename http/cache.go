package http

import (
	"container/list"
	"sync"
)

// completionCache answers identical greedy FIM requests without running
// them again: editors re-ask for the same completion as the cursor
// returns to where it was. Keys are the full prompt tokens and limits.
type completionCache struct {
	mu    sync.Mutex
	size  int
	order *list.List // front: most recent
	items map[string]*list.Element
}

type cachedCompletion struct {
	key     string
	text    string
	tokens  int
	finish  string
	stopped string
}

func newCompletionCache(size int) *completionCache {
	return &completionCache{size: size, order: list.New(), items: map[string]*list.Element{}}
}

func (c *completionCache) get(key string) (cachedCompletion, bool) {
	if c.size <= 0 {
		return cachedCompletion{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return cachedCompletion{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(cachedCompletion), true
}

func (c *completionCache) put(v cachedCompletion) {
	if c.size <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[v.key]; ok {
		el.Value = v
		c.order.MoveToFront(el)
		return
	}
	c.items[v.key] = c.order.PushFront(v)
	for c.order.Len() > c.size {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(cachedCompletion).key)
	}
}
