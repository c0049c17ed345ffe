package sched

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"superfluid/engine/enginetest"
	"superfluid/metric"
)

// recorder is an Observer writing what it is told as one line per call.
type recorder struct{ lines []string }

func (r *recorder) Start(_ context.Context, q ObservedRequest) JobObserver {
	r.lines = append(r.lines, fmt.Sprintf("start %s prompt=%d", q.Class, q.PromptTokens))
	return r
}
func (r *recorder) Admitted(a Admission) {
	r.lines = append(r.lines, fmt.Sprintf("admitted cached=%d resumed=%v restoring=%v ordered=%v", a.Cached, a.Resumed, a.Restoring, !a.End.Before(a.Start)))
}
func (r *recorder) Restored(_ time.Time, n int) {
	r.lines = append(r.lines, fmt.Sprintf("restored %d", n))
}
func (r *recorder) Prefilled(start, end time.Time, n int) {
	r.lines = append(r.lines, fmt.Sprintf("prefilled %d ordered=%v", n, end.After(start)))
}
func (r *recorder) Decoding(time.Time)  { r.lines = append(r.lines, "decoding") }
func (r *recorder) Preempted(time.Time) { r.lines = append(r.lines, "preempted") }
func (r *recorder) Published(_, _ time.Time, n int, parked bool) {
	r.lines = append(r.lines, fmt.Sprintf("published %d parked=%v", n, parked))
}
func (r *recorder) Ended(_ time.Time, res Result) {
	r.lines = append(r.lines, fmt.Sprintf("ended %s generated=%d preemptions=%d", res.Finish, res.Generated, res.Preemptions))
}

// The observer hears a preempted request's whole life in order: queue,
// admission, its prompt's steps, decode, the preemption and the publish
// of what it held, the warm resumption (one token to prefill), decode
// again, the final publish and the end.
func TestObserverHearsAPreemptedRequestsLife(t *testing.T) {
	h := newHarness(t, 1, 4096, Config{})
	rec := &recorder{}
	j := h.submit("bg", Request{Prompt: promptOf(7, 300), Class: Background, MaxTokens: 40})
	j.obs = rec.Start(context.Background(), ObservedRequest{Class: j.class, PromptTokens: j.promptLen})
	chatted := false
	for range 5000 {
		if h.done("bg") {
			break
		}
		if l := h.loop.p.laneOf(j); l != nil && l.produced > 3 && !chatted {
			chatted = true
			h.submit("chat", Request{Prompt: promptOf(100, 20), Class: Chat, MaxTokens: 5})
		}
		h.step()
	}
	h.run(1000)
	// Successive prefill steps of one admission read as one line.
	var got []string
	prefilled := 0
	for _, l := range rec.lines {
		var n int
		if _, err := fmt.Sscanf(l, "prefilled %d ordered=true", &n); err == nil {
			prefilled += n
			continue
		}
		if prefilled > 0 {
			got = append(got, fmt.Sprintf("prefilled %d", prefilled))
			prefilled = 0
		}
		got = append(got, l)
	}
	want := []string{
		"start background prompt=300",
		"admitted cached=0 resumed=false restoring=false ordered=true",
		"prefilled 300",
		"decoding",
		"preempted",
		"published 303 parked=false", // the prompt and 3 of its 4 tokens, fed back
		"admitted cached=303 resumed=true restoring=false ordered=true",
		"prefilled 1", // the 4th
		"decoding",
		"published 339 parked=false", // before the client hears the end
		"ended length generated=40 preemptions=1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("observed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The counters behind llama-server's names: a step that ran counts one
// llama_decode and its busy lanes, prompt time only for steps carrying
// prompt tokens, a request's generation after its first token; the lanes'
// KV cells are held while they run and given back after.
func TestLlamaServerCountersMoveAsItsOwn(t *testing.T) {
	h := newHarness(t, 2, 4096, Config{})
	h.submit("a", Request{Prompt: promptOf(1, 100), Class: Chat, MaxTokens: 10})
	h.submit("b", Request{Prompt: promptOf(2, 50), Class: Agent, MaxTokens: 20})
	sawCells := false
	for range 1000 {
		if !h.step() {
			break
		}
		if s := h.stats.Snapshot(); s.KVTokens > 0 && s.LanesActive > 0 {
			sawCells = true
		}
	}
	s := h.stats.Snapshot()
	if !sawCells || s.KVTokens != 0 {
		t.Fatalf("KV cells: seen while busy %v, %d after", sawCells, s.KVTokens)
	}
	if s.DecodeCalls == 0 || s.DecodeCalls > s.Ticks || s.BusySlots < s.DecodeCalls || s.BusySlots > 2*s.DecodeCalls {
		t.Fatalf("decode calls %d (ticks %d), busy slots %d", s.DecodeCalls, s.Ticks, s.BusySlots)
	}
	if s.PrefillTokens != 150 || s.PromptNS == 0 {
		t.Fatalf("prompt tokens %d in %d ns", s.PrefillTokens, s.PromptNS)
	}
	if s.PredictSteps != 9+19 || s.PredictNS == 0 {
		t.Fatalf("predicted steps %d in %d ns, want 28", s.PredictSteps, s.PredictNS)
	}
	ttft, itl := h.stats.histograms()
	mp := metric.NewPage()
	mp.AddHistogram(ttft[Chat])
	mp.AddHistogram(itl[Agent])
	var page strings.Builder
	if _, err := mp.WriteTo(&page); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`superfluid_ttft_seconds_count{class="chat"} 1`, `superfluid_itl_seconds_count{class="agent"} 19`} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("no %q in\n%s", want, page.String())
		}
	}
	var rates ScrapeRates
	if p, g := rates.since(s); p <= 0 || g <= 0 {
		t.Fatalf("first scrape's rates %v %v", p, g)
	}
	if p, g := rates.since(s); p != 0 || g != 0 {
		t.Fatalf("nothing happened since the last scrape, rates %v %v", p, g)
	}
}

// countingObserver counts what the scheduler tells it, from any goroutine.
type countingObserver struct {
	mu                      sync.Mutex
	started, ended, decoded int
	admitted                int
}

type countingJob struct{ o *countingObserver }

func (o *countingObserver) Start(context.Context, ObservedRequest) JobObserver {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started++
	return countingJob{o}
}
func (c countingJob) bump(f *int)                             { c.o.mu.Lock(); *f++; c.o.mu.Unlock() }
func (c countingJob) Admitted(Admission)                      { c.bump(&c.o.admitted) }
func (countingJob) Restored(time.Time, int)                   {}
func (countingJob) Prefilled(time.Time, time.Time, int)       {}
func (c countingJob) Decoding(time.Time)                      { c.bump(&c.o.decoded) }
func (countingJob) Preempted(time.Time)                       {}
func (countingJob) Published(time.Time, time.Time, int, bool) {}
func (c countingJob) Ended(time.Time, Result)                 { c.bump(&c.o.ended) }

// Through the running Scheduler, requests submitted at once from many
// goroutines are each started on Submit's goroutine and ended once on the
// runner's (run under -race, this is the hand-over's check).
func TestObserverThroughTheRunningScheduler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := enginetest.New(2, 512, 16, 1<<16, sleeper{})
		eng.Cost = enginetest.CostModel{Step: time.Millisecond, PrefillToken: 10 * time.Microsecond, DecodeRow: time.Millisecond}
		obs := &countingObserver{}
		s, _, stop := startScheduler(t, eng, Config{Observer: obs})
		var wg sync.WaitGroup
		for i := range 12 {
			wg.Go(func() {
				st, err := s.Submit(context.Background(), Request{Prompt: promptOf(i, 30+i), Class: Class(i % NumClasses), MaxTokens: 5})
				if err != nil {
					t.Error(err)
					return
				}
				if _, _, err := st.Collect(context.Background()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		stop()
		if obs.started != 12 || obs.ended != 12 || obs.admitted < 12 || obs.decoded < 12 {
			t.Fatalf("started %d admitted %d decoding %d ended %d, want 12 each", obs.started, obs.admitted, obs.decoded, obs.ended)
		}
	})
}
