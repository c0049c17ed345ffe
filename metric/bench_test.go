package metric

import (
	"sync/atomic"
	"testing"
	"time"

	vm "github.com/VictoriaMetrics/metrics"
)

// The hot path's cost: what the scheduler pays per token (a counter) and
// per request (a time to first token), as plain atomics (what it keeps)
// and through the library. Compare the ns/op of each pair; nothing here
// is asserted.

func BenchmarkCounterAtomic(b *testing.B) {
	var c atomic.Uint64
	for b.Loop() {
		c.Add(1)
	}
}

func BenchmarkCounterLibrary(b *testing.B) {
	c := vm.NewSet().NewCounter("bench_tokens_total")
	for b.Loop() {
		c.Inc()
	}
}

func BenchmarkCounterAtomicParallel(b *testing.B) {
	var c atomic.Uint64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Add(1)
		}
	})
}

func BenchmarkCounterLibraryParallel(b *testing.B) {
	c := vm.NewSet().NewCounter("bench_tokens_total")
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Inc()
		}
	})
}

// atomicHistogram is the scheduler's time-to-first-token histogram as it
// was before the library: a bucket search and three atomic adds.
type atomicHistogram struct {
	buckets [len(benchBoundsMS) + 1]atomic.Uint64
	sumMS   atomic.Uint64
	count   atomic.Uint64
}

var benchBoundsMS = [...]uint64{5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10_000, 20_000, 40_000}

func (h *atomicHistogram) observe(d time.Duration) {
	ms := uint64(max(d, 0) / time.Millisecond)
	i := 0
	for i < len(benchBoundsMS) && ms > benchBoundsMS[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumMS.Add(ms)
	h.count.Add(1)
}

var benchTTFT = NewHistogramDef("bench_ttft_seconds", "Time to the first token.",
	[]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40})

// benchDurations spread over the buckets, as TTFTs of a mixed load do.
var benchDurations = func() []time.Duration {
	d := make([]time.Duration, 64)
	for i := range d {
		d[i] = time.Duration(i*i) * 10 * time.Millisecond
	}
	return d
}()

func BenchmarkTTFTAtomic(b *testing.B) {
	var h atomicHistogram
	i := 0
	for b.Loop() {
		h.observe(benchDurations[i&63])
		i++
	}
}

func BenchmarkTTFTLibrary(b *testing.B) {
	h := benchTTFT.New()
	i := 0
	for b.Loop() {
		h.Observe(benchDurations[i&63].Seconds())
		i++
	}
}

func BenchmarkTTFTAtomicParallel(b *testing.B) {
	var h atomicHistogram
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			h.observe(benchDurations[i&63])
			i++
		}
	})
}

func BenchmarkTTFTLibraryParallel(b *testing.B) {
	h := benchTTFT.New()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			h.Observe(benchDurations[i&63].Seconds())
			i++
		}
	})
}
