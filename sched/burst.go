package sched

import (
	"context"
	"time"
)

// A burst of requests that arrive together — a client sending eight
// completions at once, a batch fanning out — reaches Submit over a few
// milliseconds (eight HTTP requests from one client: 0 to 8 ms apart
// under load). An idle engine woken by the first would plan a step for it
// alone; the others would wait out that step, then prefill in a second
// one while the first lane decodes beside them, so the first lane's reply
// spans a step of everyone's prompts and the whole burst ends a step
// later. llama-server takes in every queued request before it builds a
// batch. So an idle runner woken by requests whose replies are all taken
// whole (Request.Whole) gathers: it plans only once submissions have
// paused for burstQuiet, or burstGatherMax after it woke. A whole reply's
// client waits on the reply's end, which this moves by milliseconds
// against steps of hundreds. A streamed request (its first token is
// watched) or a FIM request (an editor sends one completion at a time)
// ends the gathering at once, and a busy engine never gathers: arrivals
// join at the next step anyway.
const (
	burstQuiet     = 10 * time.Millisecond
	burstGatherMax = 30 * time.Millisecond
)

// gathersBurst reports whether j, arriving at an idle engine, lets the
// runner wait for the rest of its burst: nobody reads its reply as it
// comes, and it is not an editor's completion.
func gathersBurst(j *job) bool { return j.whole && j.class != FIM }

// inboxGathers reports whether the inbox holds work and all of it may
// wait for the rest of its burst.
func (s *Scheduler) inboxGathers() bool {
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
// requests that may wait for the rest of their burst, until submissions
// pause for burstQuiet, burstGatherMax passes, or ctx ends.
func (s *Scheduler) gatherBurst(ctx context.Context) {
	if !s.inboxGathers() {
		return
	}
	timer := time.NewTimer(burstQuiet)
	defer timer.Stop()
	giveUp := time.Now().Add(burstGatherMax)
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		case <-s.wake: // another submission
			left := time.Until(giveUp)
			if left <= 0 || !s.inboxGathers() {
				return
			}
			timer.Reset(min(burstQuiet, left))
		}
	}
}
