package keys

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Keeper holds the keys in force and each key's running state (its
// buckets, its lanes in flight, its counters). Reload swaps the policies
// atomically; a key whose name survives a reload keeps its state, so the
// lanes it holds and what it has spent carry over. Any goroutine may call
// it.
type Keeper struct {
	src Source
	now func() time.Time

	policies atomic.Pointer[[]*Policy]

	mu     sync.Mutex
	states map[string]*state // by key name; under mu

	unauthorized atomic.Uint64 // requests with no key or an unknown one
}

// Open reads the keys from src. now is the clock (time.Now in service; a
// test's virtual clock).
func Open(src Source, now func() time.Time) (*Keeper, error) {
	ps, err := src.read()
	if err != nil {
		return nil, err
	}
	k := &Keeper{src: src, now: now, states: map[string]*state{}}
	k.install(ps)
	return k, nil
}

// Reload reads the source again and puts its keys in force. A source that
// fails to read or parse changes nothing: the keys in force stay, and the
// error says why.
func (k *Keeper) Reload() error {
	ps, err := k.src.read()
	if err != nil {
		return err
	}
	k.install(ps)
	return nil
}

// Source is where the keys were read from.
func (k *Keeper) Source() Source { return k.src }

// Names lists the keys in force, in the file's order.
func (k *Keeper) Names() []string {
	ps := *k.policies.Load()
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// install puts ps in force: states of surviving names take the new
// limits, new names get fresh ones, and removed names' states go (a
// request still holding one finishes against it).
func (k *Keeper) install(ps []*Policy) {
	now := k.now()
	k.mu.Lock()
	defer k.mu.Unlock()
	next := make(map[string]*state, len(ps))
	for _, p := range ps {
		st := k.states[p.Name]
		if st == nil {
			st = newState(p, now)
		} else {
			st.apply(p, now)
		}
		next[p.Name] = st
	}
	k.states = next
	k.policies.Store(&ps)
	slog.Info("api keys in force", "source", k.src.String(), "keys", len(ps))
}

// Identify finds the key a request presented, comparing its digest with
// every key's in constant time and without stopping at a match, so that
// neither which key matched nor how many there are shows in the timing.
// nil: no key in force is this one.
func (k *Keeper) Identify(key string) *Client {
	if key == "" {
		return nil
	}
	d := sha256.Sum256([]byte(key))
	ps := *k.policies.Load()
	found := -1
	for i, p := range ps {
		eq := subtle.ConstantTimeCompare(d[:], p.digest[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return nil
	}
	p := ps[found]
	k.mu.Lock()
	st := k.states[p.Name]
	k.mu.Unlock()
	if st == nil { // a reload between the two loads removed it
		return nil
	}
	return &Client{policy: p, state: st, now: k.now}
}

// Unauthorized counts a request refused for a missing or unknown key
// (once per request: the transport decides a request's headers twice).
func (k *Keeper) Unauthorized() { k.unauthorized.Add(1) }

// state is one key's running state.
type state struct {
	mu       sync.Mutex
	requests bucket // requests per minute
	tokens   bucket // tokens per minute
	lanes    int    // lanes held now
	maxLanes int

	c counters
}

func newState(p *Policy, now time.Time) *state {
	return &state{requests: newBucket(p.RequestsPerMinute, now), tokens: newBucket(p.TokensPerMinute, now), maxLanes: p.MaxLanes}
}

// apply takes a reloaded policy's limits.
func (st *state) apply(p *Policy, now time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.requests.resize(p.RequestsPerMinute, now)
	st.tokens.resize(p.TokensPerMinute, now)
	st.maxLanes = p.MaxLanes
}

// Client is a request's identified key: its policy as it was when the
// request arrived, and its running state.
type Client struct {
	policy *Policy
	state  *state
	now    func() time.Time
}

// Name is the key's name.
func (c *Client) Name() string { return c.policy.Name }

// Policy is the key's policy.
func (c *Client) Policy() *Policy { return c.policy }

// Begin charges one request against the key's requests-per-minute, or
// refuses it (a *task.Error of kind RateLimited, with when to retry).
func (c *Client) Begin() error {
	st := c.state
	st.mu.Lock()
	defer st.mu.Unlock()
	now := c.now()
	st.c.requests.Add(1)
	if !st.requests.take(1, now) {
		st.c.limitedRequests.Add(1)
		return rateLimited(st.requests.wait(1, now), "%s: over its limit of %d requests per minute", c.who(), c.policy.RequestsPerMinute)
	}
	return nil
}

// who names the key in a message to its own client.
func (c *Client) who() string { return fmt.Sprintf("API key %q", c.policy.Name) }

// Quota is a key's limits and what is left of them, for the rate-limit
// headers each API sends.
type Quota struct {
	Requests, Tokens Limit
}

// Limit is one limit's state; Max 0 is no limit.
type Limit struct {
	Max, Remaining int
	Reset          time.Duration // until the bucket is full again
}

// Now is the keeper's clock, which Quota's Reset is measured from.
func (c *Client) Now() time.Time { return c.now() }

// Quota is the key's limits as they stand now.
func (c *Client) Quota() Quota {
	st := c.state
	st.mu.Lock()
	defer st.mu.Unlock()
	now := c.now()
	var q Quota
	if st.requests.limited() {
		q.Requests = Limit{Max: int(st.requests.capacity), Remaining: st.requests.remaining(now), Reset: st.requests.untilFull(now)}
	}
	if st.tokens.limited() {
		q.Tokens = Limit{Max: int(st.tokens.capacity), Remaining: st.tokens.remaining(now), Reset: st.tokens.untilFull(now)}
	}
	return q
}
