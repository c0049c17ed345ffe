package sched

import (
	"testing"

	"superfluid/engine"
)

// diskCache is the fake cache with a "disk": a parked stream held on a
// sequence no lane or entry uses, restored by copying it, after a read
// gated by the test on a reader goroutine, as package kv's restores are.
type diskCache struct {
	*fakeCache
	parkedSeq int32
	parked    []engine.Token
	gate      chan struct{} // closed to let the read finish
	read      chan struct{} // closed when it has
	fail      bool          // the read fails: the lane prefills cold
	pending   map[int32]int // restoring seq → depth
}

var _ RestoringCache = (*diskCache)(nil)

// park moves the cache's entry for tokens to the disk.
func (c *diskCache) park(t *testing.T, tokens []engine.Token) {
	for _, e := range c.entries {
		if equalTokens(e.tokens, tokens) {
			c.remove(e)
			c.parkedSeq, c.parked = e.seq, e.tokens
			return
		}
	}
	t.Fatal("nothing to park")
}

func (c *diskCache) AcquireRestoring(tokens []engine.Token, ready func()) (int32, int, bool, error) {
	depth := min(commonPrefix(tokens, c.parked), len(tokens)-1)
	if depth == 0 {
		seq, cached, err := c.Acquire(tokens)
		return seq, cached, false, err
	}
	seq, cached, err := c.Acquire(nil)
	if err != nil || cached != 0 {
		return seq, cached, false, err
	}
	c.pending[seq] = depth
	gate, read := c.gate, c.read
	go func() {
		<-gate
		close(read)
		ready()
	}()
	return seq, 0, true, nil
}

func (c *diskCache) FinishRestore(seq int32) int {
	depth := c.pending[seq]
	delete(c.pending, seq)
	if c.fail || depth == 0 {
		return 0
	}
	if err := c.eng.CopyPrefix(c.parkedSeq, seq, depth); err != nil {
		return 0
	}
	return depth
}

// A lane restores a 4,000-token parked stream while another decodes: the
// decoding lane's steps go on while the read is held open, the restoring
// lane is in none of them, and once the read ends it starts warm and
// produces what it would have alone. A failed read prefills it cold, with
// the same output.
func TestRestoreRunsBesideDecodingLanes(t *testing.T) {
	for _, fail := range []bool{false, true} {
		h := newHarness(t, 2, 512, Config{}).fast()
		h.eng.KeepPlans = true
		dc := &diskCache{fakeCache: h.cache, gate: make(chan struct{}), read: make(chan struct{}), fail: fail, pending: map[int32]int{}}
		h.loop = newLoop(h.eng, dc, h.loop.p.cfg, h.stats)
		long := promptOf(1, 4000)
		h.submit("first", Request{Prompt: long, Class: Agent, MaxTokens: 2})
		h.run(100)
		parked := append(append([]engine.Token(nil), long...), h.tokens("first")[0])
		dc.park(t, parked)

		h.submit("decoding", Request{Prompt: promptOf(2, 20), Class: Chat, MaxTokens: 1 << 20})
		h.step()
		resumed := Request{Prompt: append(append([]engine.Token(nil), parked...), promptOf(3, 50)...), Class: Agent, MaxTokens: 5}
		h.submit("resumed", resumed)
		h.step()
		tag := h.laneOf("resumed")
		if tag == 0 || !h.loop.p.find(tag).restoring {
			t.Fatal("the resumed request is not restoring")
		}
		before := len(h.eng.Plans)
		decoded := len(h.out["decoding"])
		for range 20 {
			h.step()
		}
		for _, p := range h.eng.Plans[before:] {
			if !decodesIn(&p, h.laneOf("decoding")) || len(p.Admits)+len(p.Prefills) > 0 {
				t.Fatalf("a step during the restore: %+v", p)
			}
		}
		if got := len(h.out["decoding"]) - decoded; got != 20 {
			t.Fatalf("the decoding lane made %d tokens in 20 steps of the restore", got)
		}
		close(dc.gate)
		<-dc.read
		for !h.done("resumed") {
			h.step()
		}
		h.expectOutput("resumed", resumed)
		r := h.result("resumed")
		want := len(parked)
		if fail {
			want = 0
		}
		if r.CachedTokens != want {
			t.Fatalf("fail=%v: the resumed request started with %d cached tokens, want %d", fail, r.CachedTokens, want)
		}
		h.jobs["decoding"].stream.Cancel()
		h.run(10)
	}
}
