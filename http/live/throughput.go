package live

import (
	"context"
	"sync"
	"time"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/status"
	"superfluid/task"
)

// Throughput samples every SampleEvery over RingLength: a view opened now
// plots the last five minutes.
const (
	SampleEvery = 2 * time.Second
	RingLength  = 150
)

// throughputRing keeps the server's recent token rates. The sampler
// goroutine adds one sample each interval from the schedulers' counters;
// readers copy the ring.
type throughputRing struct {
	mu      sync.Mutex
	samples []status.Sample // oldest first, at most RingLength
	// last is each loaded model's counters at the previous sample: a model
	// loaded since counts from its first sample, one unloaded drops out.
	last map[*task.Model]tokenTotals
	at   time.Time
}

type tokenTotals struct{ prompt, generated uint64 }

// sample adds the rates since the previous sample; the first sample only
// takes the counters in.
func (r *throughputRing) sample(loaded []wire.LoadedEntry, now time.Time) {
	next := make(map[*task.Model]tokenTotals, len(loaded))
	var prompt, generated uint64
	for _, e := range loaded {
		if e.Model == nil {
			continue
		}
		ls, ok := e.Model.Sched.(interface{ Stats() sched.Snapshot })
		if !ok {
			continue
		}
		snap := ls.Stats()
		t := tokenTotals{snap.PrefillTokens, snap.DecodeTokens}
		next[e.Model] = t
		if was, ok := r.last[e.Model]; ok {
			prompt += t.prompt - min(was.prompt, t.prompt)
			generated += t.generated - min(was.generated, t.generated)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last != nil {
		secs := now.Sub(r.at).Seconds()
		if secs > 0 {
			if len(r.samples) == RingLength {
				r.samples = append(r.samples[:0], r.samples[1:]...)
			}
			r.samples = append(r.samples, status.Sample{At: now, PromptPerSecond: float64(prompt) / secs, GeneratedPerSecond: float64(generated) / secs})
		}
	}
	r.last, r.at = next, now
}

// snapshot copies the ring.
func (r *throughputRing) snapshot() status.Throughput {
	r.mu.Lock()
	defer r.mu.Unlock()
	return status.Throughput{IntervalSeconds: SampleEvery.Seconds(), Samples: append([]status.Sample{}, r.samples...)}
}

// run samples every interval until ctx ends.
func (r *throughputRing) run(ctx context.Context, h wire.Host, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	r.sample(h.Loaded(nil), time.Now()) // the server's own view: every model
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.sample(h.Loaded(nil), now)
		}
	}
}
