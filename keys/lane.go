package keys

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"superfluid/sched"
	"superfluid/task"
)

// laneRetry is the Retry-After of a request over its key's lane cap: a
// lane frees when one of the key's own generations ends, which nothing
// here can foresee; a second is a short generation's length.
const laneRetry = time.Second

// AllowsModel reports whether the key may use the model a request names;
// same says whether a requested name asks for a listed one.
func (c *Client) AllowsModel(name string, same func(asked, listed string) bool) bool {
	if c.policy.Models == nil {
		return true
	}
	return slices.ContainsFunc(c.policy.Models, func(m string) bool { return same(name, m) })
}

// RefuseModel counts a request refused for naming a model the key may
// not use (answered as an unknown model, so the key learns nothing of
// what else the server holds).
func (c *Client) RefuseModel() { c.state.c.forbiddenModel.Add(1) }

// Request is one request of the key: the lanes its generations hold.
// A lane is held from admission until both its generation has ended and
// the request that started it has finished answering (End), so a client
// still reading a finished generation's answer still holds its lane.
type Request struct {
	c     *Client
	mu    sync.Mutex
	lanes []*Lane
	ended bool
}

// Request starts one request of the key; End ends it.
func (c *Client) Request() *Request {
	c.state.c.requestsInFlight.Add(1)
	return &Request{c: c}
}

// Client is the key the request presented.
func (r *Request) Client() *Client { return r.c }

// End releases the request's hold on every lane it was admitted.
func (r *Request) End() {
	r.mu.Lock()
	lanes, ended := r.lanes, r.ended
	r.lanes, r.ended = nil, true
	r.mu.Unlock()
	if !ended {
		r.c.state.c.requestsInFlight.Add(-1)
	}
	for _, l := range lanes {
		l.release()
	}
}

// Lane admits one generation of class class whose prompt and reply are
// estimated at estimate tokens: the class must be the key's, a lane must
// be free under its cap, and the tokens bucket must hold the estimate.
// The Lane it returns is charged the estimate until Settle.
func (r *Request) Lane(class sched.Class, estimate int) (*Lane, error) {
	c := r.c
	if err := c.checkClass(class); err != nil {
		return nil, err
	}
	st := c.state
	st.mu.Lock()
	defer st.mu.Unlock()
	now := c.now()
	if st.maxLanes > 0 && st.lanes >= st.maxLanes {
		st.c.limitedLanes.Add(1)
		return nil, rateLimited(laneRetry, "%s holds %d lanes, its cap; one frees when one of its requests ends", c.who(), st.maxLanes)
	}
	if !st.tokens.take(float64(estimate), now) {
		st.c.limitedTokens.Add(1)
		return nil, rateLimited(st.tokens.wait(float64(estimate), now), "%s: over its limit of %d tokens per minute (this request is estimated at %d)", c.who(), c.policy.TokensPerMinute, estimate)
	}
	st.lanes++
	st.c.lanes.Store(int64(st.lanes))
	l := &Lane{c: c, estimate: estimate}
	l.holds.Store(2) // the generation's end and the request's
	r.mu.Lock()
	if r.ended { // work started after its request answered: its end alone frees it
		l.released.Do(func() { l.holds.Store(1) })
	} else {
		r.lanes = append(r.lanes, l)
	}
	r.mu.Unlock()
	return l, nil
}

// Embed admits an embedding of tokens tokens in class class: the class
// must be the key's and the tokens bucket must hold them; they are
// charged whole (an embedding's cost is known before it runs).
func (c *Client) Embed(class sched.Class, tokens int) error {
	if err := c.checkClass(class); err != nil {
		return err
	}
	st := c.state
	st.mu.Lock()
	defer st.mu.Unlock()
	now := c.now()
	if !st.tokens.take(float64(tokens), now) {
		st.c.limitedTokens.Add(1)
		return rateLimited(st.tokens.wait(float64(tokens), now), "%s: over its limit of %d tokens per minute (this request has %d)", c.who(), c.policy.TokensPerMinute, tokens)
	}
	st.c.promptTokens.Add(uint64(tokens))
	return nil
}

// allows reports whether the key's policy has class.
func (c *Client) allows(class sched.Class) bool {
	return int(class) < sched.NumClasses && c.policy.Classes[class]
}

// checkClass refuses a class the key's policy leaves out, by name.
func (c *Client) checkClass(class sched.Class) error {
	if c.allows(class) {
		return nil
	}
	c.state.c.forbiddenClass.Add(1)
	var allowed []string
	for cl, ok := range c.policy.Classes {
		if ok {
			allowed = append(allowed, sched.Class(cl).String())
		}
	}
	return &task.Error{Kind: task.Forbidden, Param: "class", Code: "class_not_allowed",
		Msg: fmt.Sprintf("%s may not use the %s class (it may use %v)", c.who(), class, allowed)}
}

// Lane is one admitted generation of a key.
type Lane struct {
	c        *Client
	estimate int
	settled  sync.Once
	released sync.Once
	holds    atomic.Int32 // the lane frees when both are gone
}

// Settle ends the generation's hold and settles its tokens: what it was
// charged at admission is replaced by the prompt and generated tokens it
// took (0, 0 for a generation that never ran).
func (l *Lane) Settle(prompt, generated int) {
	l.settled.Do(func() {
		st := l.c.state
		st.mu.Lock()
		st.tokens.give(float64(l.estimate-prompt-generated), l.c.now())
		st.mu.Unlock()
		st.c.promptTokens.Add(uint64(prompt))
		st.c.generatedTokens.Add(uint64(generated))
		l.drop()
	})
}

// release ends the request's hold.
func (l *Lane) release() { l.released.Do(l.drop) }

func (l *Lane) drop() {
	if l.holds.Add(-1) > 0 {
		return
	}
	st := l.c.state
	st.mu.Lock()
	defer st.mu.Unlock()
	st.lanes--
	st.c.lanes.Store(int64(st.lanes))
}

func rateLimited(retry time.Duration, format string, args ...any) *task.Error {
	return &task.Error{Kind: task.RateLimited, Code: "rate_limit_exceeded", Msg: fmt.Sprintf(format, args...), RetryAfter: retry}
}
