package bench

import (
	"math"
	"testing"
)

func TestPercentileInterpolatesBetweenRanks(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ p, want float64 }{
		{0, 1}, {50, 5.5}, {95, 9.55}, {99, 9.91}, {100, 10}, {-5, 1}, {150, 10},
	} {
		if got := Percentile(s, c.p); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("p%v = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Percentile([]float64{7}, 95); got != 7 {
		t.Errorf("one sample: p95 = %v", got)
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("empty sample: want NaN")
	}
}

func TestSummarizeSortsAndRounds(t *testing.T) {
	if Summarize(nil) != nil {
		t.Fatal("an empty sample summarises to nil (not measured)")
	}
	s := Summarize([]float64{3, 1, 2, 4.00049})
	want := Summary{N: 4, Mean: 2.5, Min: 1, P50: 2.5, P95: 3.85, P99: 3.97, Max: 4}
	if *s != want {
		t.Fatalf("got %+v, want %+v", *s, want)
	}
}

func TestRatioNeedsBothSides(t *testing.T) {
	if ratio(nil, ptr(1.0)) != nil || ratio(ptr(1.0), nil) != nil || ratio(ptr(1.0), ptr(0.0)) != nil {
		t.Fatal("a ratio with a missing or zero side must be absent")
	}
	if r := ratio(ptr(3.0), ptr(2.0)); r == nil || *r != 1.5 {
		t.Fatalf("3/2 = %v", r)
	}
}

func TestKeyMetAgainstTarget(t *testing.T) {
	if k := newKey("x", 1.2, 1.5, "lower"); !*k.Met {
		t.Error("1.2 ≤ 1.5 is met")
	}
	if k := newKey("x", 0.9, 0.97, "higher"); *k.Met {
		t.Error("0.9 ≥ 0.97 is not met")
	}
	if k := newKey("x", 10, 0, "higher"); k.Met != nil || k.Target != nil {
		t.Error("no target: no verdict")
	}
}
