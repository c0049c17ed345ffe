package bench

import (
	"math"
	"slices"
)

// Summary describes a sample: its size, mean, extremes and the percentiles
// a latency target is stated in. Values are rounded to three decimals so a
// report stays readable.
type Summary struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Summarize returns the summary of xs, or nil when xs is empty (a report
// shows "not measured" as an absent field, never as a zero).
func Summarize(xs []float64) *Summary {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return &Summary{
		N:    len(s),
		Mean: round3(sum / float64(len(s))),
		Min:  round3(s[0]),
		P50:  round3(Percentile(s, 50)),
		P95:  round3(Percentile(s, 95)),
		P99:  round3(Percentile(s, 99)),
		Max:  round3(s[len(s)-1]),
	}
}

// Percentile returns the p-th percentile (0–100) of sorted, interpolating
// linearly between the two nearest ranks (numpy's default, Hyndman–Fan
// type 7): with few samples a nearest-rank p95 would just be the maximum.
// It returns NaN for an empty sample.
func Percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	p = min(max(p, 0), 100)
	rank := p / 100 * float64(n-1)
	lo := int(math.Floor(rank))
	hi := min(lo+1, n-1)
	return sorted[lo] + (rank-float64(lo))*(sorted[hi]-sorted[lo])
}

// ratio returns a/b rounded, or nil when either side was not measured.
func ratio(a, b *float64) *float64 {
	if a == nil || b == nil || *b == 0 {
		return nil
	}
	return ptr(round3(*a / *b))
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func ptr[T any](v T) *T { return &v }
