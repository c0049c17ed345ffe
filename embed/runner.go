// Package embed runs embedding requests on an embedding engine: requests
// queue, and each engine call takes as many queued inputs as fit one
// micro-batch (the engine's token and sequence limits), so a request of many
// inputs runs in as few calls as fit and inputs of several requests share
// calls. One goroutine (Run) owns the engine; each call first takes a turn
// from the process's arbiter in the request's class, so embedding (by
// default Background) never slows the completions of a better class.
package embed

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"superfluid/engine"
	"superfluid/sched"
)

// Turns is the process's arbiter of engine steps: a call takes a turn in
// its class before it runs and gives it back after.
type Turns interface {
	Acquire(ctx context.Context, c sched.Class) error
	Release()
}

// Errors Embed returns.
var (
	// ErrQueueFull: more inputs wait than Config.MaxQueued allows.
	ErrQueueFull = errors.New("embed: queue full")
	// ErrClosed: the runner stopped before the request finished.
	ErrClosed = errors.New("embed: runner closed")
	// ErrTooLong: an input has more tokens than one engine call takes
	// (InputError says which).
	ErrTooLong = errors.New("embed: input too long")
	// ErrEmpty: no inputs, or an input of no tokens.
	ErrEmpty = errors.New("embed: empty input")
)

// InputError names the input a refusal is about.
type InputError struct {
	Index int
	Err   error
	Msg   string
}

func (e *InputError) Error() string { return fmt.Sprintf("input %d: %s", e.Index, e.Msg) }
func (e *InputError) Unwrap() error { return e.Err }

// Config configures a Runner.
type Config struct {
	// MaxQueued bounds the inputs waiting or running (default 4096); a
	// request that would exceed it is refused with ErrQueueFull.
	MaxQueued int
	// Turns, when set, arbitrates every engine call.
	Turns Turns
}

// Stats are the runner's counters.
type Stats struct {
	Calls  atomic.Uint64 // engine calls
	Inputs atomic.Uint64 // inputs embedded
	Tokens atomic.Uint64 // tokens embedded
	Queued atomic.Int64  // inputs waiting or running
}

// Runner queues embedding requests for one engine.
type Runner struct {
	eng       engine.Embedder
	cfg       Config
	maxInputs int
	maxTokens int
	dim       int

	in     chan *job
	closed chan struct{} // closed when Run returns
	stats  Stats
}

// New returns a runner over eng; Run must run for requests to finish.
func New(eng engine.Embedder, cfg Config) (*Runner, error) {
	if cfg.MaxQueued < 0 {
		return nil, errors.New("embed: negative MaxQueued")
	}
	if cfg.MaxQueued == 0 {
		cfg.MaxQueued = 4096
	}
	maxIn, maxTok := eng.EmbedLimits()
	if maxIn < 1 || maxTok < 1 || eng.EmbedDim() < 1 {
		return nil, fmt.Errorf("embed: the engine embeds nothing (%d inputs, %d tokens, %d floats)", maxIn, maxTok, eng.EmbedDim())
	}
	return &Runner{eng: eng, cfg: cfg, maxInputs: maxIn, maxTokens: maxTok, dim: eng.EmbedDim(),
		in: make(chan *job), closed: make(chan struct{})}, nil
}

// Dim is the length of one vector.
func (r *Runner) Dim() int { return r.dim }

// MaxInputTokens is the most tokens one input may have.
func (r *Runner) MaxInputTokens() int { return r.maxTokens }

// Stats are the runner's counters; any goroutine may read them.
func (r *Runner) Stats() *Stats { return &r.stats }

// Embed queues inputs in class c and waits for their vectors (each Dim
// floats, pooled, not normalized). ctx ending drops the inputs not yet run
// and returns its error. Any goroutine may call it.
func (r *Runner) Embed(ctx context.Context, inputs [][]engine.Token, c sched.Class) ([][]float32, error) {
	if err := r.check(inputs); err != nil {
		return nil, err
	}
	n := int64(len(inputs))
	if r.stats.Queued.Add(n) > int64(r.cfg.MaxQueued) {
		r.stats.Queued.Add(-n)
		return nil, ErrQueueFull
	}
	j := &job{ctx: ctx, inputs: inputs, class: c, vecs: make([]float32, len(inputs)*r.dim), left: len(inputs),
		done: make(chan struct{})}
	select {
	case r.in <- j:
	case <-ctx.Done():
		r.stats.Queued.Add(-n)
		return nil, ctx.Err()
	case <-r.closed:
		r.stats.Queued.Add(-n)
		return nil, ErrClosed
	}
	select {
	case <-j.done:
	case <-ctx.Done():
		// The runner drops what is left of the job when it next plans.
		return nil, ctx.Err()
	}
	if j.err != nil {
		return nil, j.err
	}
	out := make([][]float32, len(inputs))
	for i := range out {
		out[i] = j.vecs[i*r.dim : (i+1)*r.dim : (i+1)*r.dim]
	}
	return out, nil
}

func (r *Runner) check(inputs [][]engine.Token) error {
	if len(inputs) == 0 {
		return ErrEmpty
	}
	for i, in := range inputs {
		if len(in) == 0 {
			return &InputError{Index: i, Err: ErrEmpty, Msg: "no tokens"}
		}
		if len(in) > r.maxTokens {
			return &InputError{Index: i, Err: ErrTooLong, Msg: fmt.Sprintf("%d tokens, more than the %d one input may have", len(in), r.maxTokens)}
		}
	}
	return nil
}

// Run serves requests until ctx ends; it owns the engine. Requests still
// queued then fail with ErrClosed.
func (r *Runner) Run(ctx context.Context) error {
	defer close(r.closed)
	var (
		queue []*job
		batch [][]engine.Token
		out   []float32
	)
	defer func() {
		for _, j := range queue {
			r.finish(j, ErrClosed)
		}
	}()
	for {
		queue = r.dropCancelled(queue)
		if len(queue) == 0 {
			select {
			case j := <-r.in:
				queue = append(queue, j)
			case <-ctx.Done():
				return nil
			}
			continue
		}
		// Take whatever else has arrived, so it can share this call.
		for more := true; more; {
			select {
			case j := <-r.in:
				queue = append(queue, j)
			default:
				more = false
			}
		}
		c := plan(queue, r.maxInputs, r.maxTokens)
		if c.empty || len(c.parts) == 0 {
			// Unreachable: Embed refuses inputs no call could take, and
			// every queued job has inputs left. Fail loudly, never spin.
			for _, j := range queue {
				r.finish(j, errors.New("embed: internal error: queued inputs fit no engine call"))
			}
			queue = queue[:0]
			continue
		}
		if err := r.acquire(ctx, c.class); err != nil {
			return nil // ctx ended while waiting for a turn
		}
		batch = c.batch(batch)
		var err error
		out, err = r.eng.Embed(batch, out[:0])
		r.release()
		r.stats.Calls.Add(1)
		queue = r.deliver(queue, &c, out, err)
	}
}

func (r *Runner) acquire(ctx context.Context, c sched.Class) error {
	if r.cfg.Turns == nil {
		return ctx.Err()
	}
	return r.cfg.Turns.Acquire(ctx, c)
}

func (r *Runner) release() {
	if r.cfg.Turns != nil {
		r.cfg.Turns.Release()
	}
}

// deliver copies a call's vectors into its jobs (or fails them with err)
// and returns the queue without the jobs that are now finished.
func (r *Runner) deliver(queue []*job, c *call, out []float32, err error) []*job {
	at := 0
	for _, p := range c.parts {
		j := p.j
		n := p.to - p.from
		if err != nil {
			r.finish(j, fmt.Errorf("embed: %w", err))
			continue
		}
		copy(j.vecs[p.from*r.dim:p.to*r.dim], out[at*r.dim:(at+n)*r.dim])
		at += n
		j.next = p.to
		j.left -= n
		r.stats.Inputs.Add(uint64(n))
		for _, in := range j.inputs[p.from:p.to] {
			r.stats.Tokens.Add(uint64(len(in)))
		}
		if j.left == 0 {
			r.finish(j, nil)
		}
	}
	return r.keepUnfinished(queue)
}

// finish ends a job once: its vectors or err are final.
func (r *Runner) finish(j *job, err error) {
	if j.left < 0 {
		return
	}
	r.stats.Queued.Add(-int64(len(j.inputs)))
	j.err = err
	j.left = -1
	close(j.done)
}

// dropCancelled ends the jobs whose requests went away.
func (r *Runner) dropCancelled(queue []*job) []*job {
	for _, j := range queue {
		if j.ctx.Err() != nil {
			r.finish(j, j.ctx.Err())
		}
	}
	return r.keepUnfinished(queue)
}

func (r *Runner) keepUnfinished(queue []*job) []*job {
	kept := queue[:0]
	for _, j := range queue {
		if j.left >= 0 {
			kept = append(kept, j)
		}
	}
	clear(queue[len(kept):])
	return kept
}
