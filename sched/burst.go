package sched

import (
	"context"
	"sync"
	"time"
)

// A burst of requests that arrive together — a client sending eight
// completions at once, a batch fanning out — reaches Submit over a few
// milliseconds: each HTTP request is read, its body parsed and its prompt
// rendered and tokenized before it is submitted. An idle engine woken by
// the first would plan a step for it alone; the others would wait out that
// step, then prefill in a second one while the first lane decodes beside
// them, so the first lane's reply spans a step of everyone's prompts and
// the whole burst ends a step later. llama-server takes in every queued
// request before it builds a batch.
//
// So the HTTP layer announces each generation request the moment its
// model is known (Expect), and settles the announcement once the request
// has submitted its work or failed. An idle runner woken by requests
// whose replies are all taken whole (Request.Whole) gathers while
// announced requests are still on their way, at most burstGatherMax after
// it woke; with none on the way it plans at once, so a lone request never
// waits for company that is not coming (a quiet period did: 10 ms on every
// request an idle server took whole). A streamed request (its first token
// is watched) or a FIM request (an editor sends one completion at a time)
// ends the gathering at once, and a busy engine never gathers: arrivals
// join at the next step anyway.
const burstGatherMax = 30 * time.Millisecond

// Expect announces a submission on its way: until arrived is called, an
// idle runner holding only work taken whole waits for it (at most
// burstGatherMax). arrived may be called more than once; the first call
// counts. Any goroutine.
func (s *Scheduler) Expect() (arrived func()) {
	s.expected.Add(1)
	var once sync.Once
	return func() {
		once.Do(func() {
			s.expected.Add(-1)
			s.nudge()
		})
	}
}

// gathersBurst reports whether j, arriving at an idle engine, lets the
// runner wait for the rest of its burst: nobody reads its reply as it
// comes, and it is not an editor's completion.
func gathersBurst(j *job) bool { return j.whole && j.class != FIM }

// inboxGathers reports whether the inbox holds work, all of it may wait
// for the rest of its burst, and some of that rest is on its way.
func (s *Scheduler) inboxGathers() bool {
	if s.expected.Load() <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.inbox) == 0 {
		return false
	}
	for _, j := range s.inbox {
		if !gathersBurst(j) {
			return false
		}
	}
	return true
}

// gatherBurst waits, on an idle engine, while the inbox holds only
// requests that may wait for the rest of their burst and announced
// requests are on their way, until burstGatherMax passes or ctx ends.
func (s *Scheduler) gatherBurst(ctx context.Context) {
	if !s.inboxGathers() {
		return
	}
	timer := time.NewTimer(burstGatherMax)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		case <-s.wake: // a submission, or an announcement settled
			if !s.inboxGathers() {
				return
			}
		}
	}
}
