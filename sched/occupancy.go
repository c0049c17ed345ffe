package sched

import (
	"context"
	"sync"
	"time"
)

// LaneView is one lane as a status view shows it: what its request is and
// how far it got, copied when the runner last published (within a step).
type LaneView struct {
	ID    uint64 // the request's stream ID
	Class Class
	// API is the dialect that submitted the request (WithAPI), "" when
	// the submitter did not say.
	API  string
	Seq  int32 // the engine sequence it runs on
	Slot int   // its row among the lanes, kept while it runs (from 0)
	// Restoring: the lane waits on its warm prefix being read from disk.
	Restoring bool
	// PromptTokens is the request's own prompt; ToPrefill what the lane's
	// admission prefills (the prompt and, after a preemption, the output
	// so far); Prefilled how much of that the sequence holds.
	PromptTokens, ToPrefill, Prefilled int
	// CachedTokens is the warm prefix the request's first admission found.
	CachedTokens int
	Generated    int // tokens delivered, over all its admissions
	Preemptions  int
	Submitted    time.Time
	Admitted     time.Time // its last admission
	FirstToken   time.Time // zero until one was delivered
}

// Decoding reports whether the lane's prompt is in and it samples tokens.
func (v LaneView) Decoding() bool { return !v.Restoring && v.Prefilled >= v.ToPrefill }

// QueueView is one class's queue: how many requests wait and since when
// the oldest waits (zero when none does).
type QueueView struct {
	Waiting int
	Oldest  time.Time
}

// Occupancy is what the scheduler runs and what waits, as of the runner's
// last publication.
type Occupancy struct {
	Lanes  []LaneView // oldest admission first
	Queues [NumClasses]QueueView
}

// occupancyBoard is where the runner publishes the lanes and queues for
// readers on other goroutines. The runner rewrites it in place (a step
// allocates nothing once the buffer has grown to the lane count); the
// mutex is held only to copy, never across engine work, so a reader
// delays a step by a copy of a few lanes at most.
type occupancyBoard struct {
	mu     sync.Mutex
	lanes  []LaneView
	queues [NumClasses]QueueView
}

// publishLanes copies the planner's lanes and queues onto the board.
// Runner goroutine only.
func (p *planner) publishLanes() {
	b := &p.stats.board
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lanes = b.lanes[:0]
	for _, l := range p.lanes {
		if l.finishing {
			continue // retiring in the next plan: its request has ended
		}
		j := l.job
		b.lanes = append(b.lanes, LaneView{
			ID: j.id, Class: j.class, API: j.api, Seq: l.seq, Slot: l.slot, Restoring: l.restoring,
			PromptTokens: j.promptLen, ToPrefill: len(j.prompt), Prefilled: l.prefilled,
			CachedTokens: j.cached, Generated: j.generated, Preemptions: j.preemptions,
			Submitted: j.submitted, Admitted: j.admittedAt, FirstToken: j.firstToken,
		})
	}
	for c := range p.queues {
		q := QueueView{Waiting: len(p.queues[c])}
		for _, j := range p.queues[c] {
			if q.Oldest.IsZero() || j.submitted.Before(q.Oldest) {
				q.Oldest = j.submitted
			}
		}
		b.queues[c] = q
	}
}

// Occupancy copies the lanes and queues the runner last published. Any
// goroutine; it waits for nothing but another reader's or the runner's
// copy.
func (s *Scheduler) Occupancy() Occupancy { return s.stats.occupancy() }

func (c *counters) occupancy() Occupancy {
	b := &c.board
	b.mu.Lock()
	defer b.mu.Unlock()
	return Occupancy{Lanes: append([]LaneView(nil), b.lanes...), Queues: b.queues}
}

// apiKey is the context key of WithAPI.
type apiKey struct{}

// WithAPI marks ctx as a request of the named API (openai, ollama, ...):
// a request submitted under it shows that API in the lane views.
func WithAPI(ctx context.Context, api string) context.Context {
	return context.WithValue(ctx, apiKey{}, api)
}

// apiOf is the API WithAPI put on ctx, "" for none.
func apiOf(ctx context.Context) string {
	api, _ := ctx.Value(apiKey{}).(string)
	return api
}
