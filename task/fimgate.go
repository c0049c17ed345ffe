package task

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"superfluid/sched"
)

// FIMRate configures the FIM gate: inline completions past Rate a second
// (with bursts of Burst) are refused at once with a retry time, instead
// of queueing behind one another for lanes.
type FIMRate struct {
	// Rate is the sustained inline completions a second; 0 takes
	// DefaultFIMRate, negative turns the bucket off.
	Rate float64
	// Burst is how many may come at once above the rate; 0 takes
	// DefaultFIMBurst.
	Burst int
}

// The defaults. A fast typist makes about 8 keystrokes a second (100
// words a minute), and an editor that asks on every keystroke (llama.vim
// does; Continue and llama.vscode debounce to fewer) sends no more: the
// rate serves one such editor unthrottled in steady state. Each FIM
// request takes a lane for a prompt and a short reply — on the 2-core CPU
// about a third of a second at idle for the small model — so four lanes
// serve some 10 a second at best; more than that only queues, and a
// queued completion for a keystroke the editor has moved past is worth
// nothing. The burst takes two seconds of it at once: a paste, or
// several files' completions asked together, are not refused.
const (
	DefaultFIMRate  = 8
	DefaultFIMBurst = 16
)

// withDefaults fills the zero fields.
func (r FIMRate) withDefaults() FIMRate {
	if r.Rate == 0 {
		r.Rate = DefaultFIMRate
	}
	if r.Burst == 0 {
		r.Burst = DefaultFIMBurst
	}
	return r
}

// Validate refuses a rate the bucket cannot run with.
func (r FIMRate) Validate() error {
	r = r.withDefaults()
	if r.Burst < 1 {
		return fmt.Errorf("task: FIM burst %d: need at least 1", r.Burst)
	}
	if r.Rate > 0 && r.Rate < 1e-3 {
		return fmt.Errorf("task: FIM rate %g a second is below one a thousand seconds (negative turns the bucket off)", r.Rate)
	}
	return nil
}

// FIMGate is what every inline completion passes before it is queued
// (Start): the rate bucket, and supersession — a client's newer
// completion cancels its older one, since the editor has moved past the
// keystroke it was for (a client is what the transport names, WithClient;
// a request naming none is superseded by nothing). One gate serves the
// whole server (every model); any goroutine may use it.
type FIMGate struct {
	now func() time.Time

	mu     sync.Mutex
	bucket *Bucket // nil: no rate bound
	// waiting is each client's newest inline completion, until it ends.
	waiting map[string]*Job

	shed, superseded atomic.Int64
}

// NewFIMGate makes the gate; now is its clock (nil: time.Now). r must
// have passed Validate.
func NewFIMGate(r FIMRate, now func() time.Time) *FIMGate {
	r = r.withDefaults()
	if now == nil {
		now = time.Now
	}
	g := &FIMGate{now: now, waiting: map[string]*Job{}}
	if r.Rate > 0 {
		g.bucket = NewBucket(r.Rate, r.Burst)
	}
	return g
}

// Shed is how many inline completions the bucket refused; Superseded how
// many a newer one from the same client cancelled while they waited.
func (g *FIMGate) Shed() int64       { return g.shed.Load() }
func (g *FIMGate) Superseded() int64 { return g.superseded.Load() }

// supersede cancels client's previous completion unless it has ended: it
// is for text the editor has since changed. One that never started is
// answered Superseded (409); one running ends with what it made.
func (g *FIMGate) supersede(client string) {
	if client == "" {
		return
	}
	g.mu.Lock()
	prev := g.waiting[client]
	delete(g.waiting, client)
	g.mu.Unlock()
	if prev == nil || allDone(prev.streams) {
		return
	}
	if allWaiting(prev.streams) {
		prev.superseded.Store(true) // never ran: Run answers it Superseded
	}
	for _, st := range prev.streams {
		st.Cancel()
	}
	g.superseded.Add(1)
}

// admit takes a token from the bucket, or refuses with when to retry.
func (g *FIMGate) admit() error {
	if g.bucket == nil {
		return nil
	}
	g.mu.Lock()
	ok, wait := g.bucket.Take(g.now())
	g.mu.Unlock()
	if ok {
		return nil
	}
	g.shed.Add(1)
	return ThrottledError(wait)
}

// track remembers j as client's newest completion. Past a few clients,
// those whose completions have ended are dropped, so the table holds
// about one entry per client with one running or waiting.
func (g *FIMGate) track(client string, j *Job) {
	if client == "" {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting[client] = j
	if len(g.waiting) > 64 {
		for c, prev := range g.waiting {
			if allDone(prev.streams) {
				delete(g.waiting, c)
			}
		}
	}
}

// allDone reports whether every choice has ended.
func allDone(sts []*sched.Stream) bool {
	for _, st := range sts {
		if !isDone(st) {
			return false
		}
	}
	return true
}

// allWaiting reports whether every choice still waits for a lane.
func allWaiting(sts []*sched.Stream) bool {
	for _, st := range sts {
		if st.Started() || isDone(st) {
			return false
		}
	}
	return true
}

func isDone(st *sched.Stream) bool {
	select {
	case <-st.Done():
		return true
	default:
		return false
	}
}

// clientKey is the context key of the client a request came from.
type clientKey struct{}

// WithClient is ctx naming the client a request came from (an editor: the
// transport's word for it), whose newer inline completion supersedes its
// waiting older one.
func WithClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

func clientOf(ctx context.Context) string {
	c, _ := ctx.Value(clientKey{}).(string)
	return c
}

// isFIM reports whether a request's choices run in the FIM class.
func isFIM(specs []*Spec) bool {
	for _, s := range specs {
		if s.Class == sched.FIM {
			return true
		}
	}
	return false
}
