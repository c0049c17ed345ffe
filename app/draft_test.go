package app

import (
	"testing"

	"superfluid/sched"
)

// An engine is opened with the draft bound exactly when it will be asked
// for drafts: n-gram drafts on any model, a draft model's or the MTP
// layers' on the default model only (a hybrid then keeps that many
// rollback snapshots, memory it would otherwise not hold).
func TestDraftBoundFollowsWhoSpeculates(t *testing.T) {
	main, other := ModelSpec{Path: "main.gguf"}, ModelSpec{Path: "other.gguf"}
	cases := []struct {
		sp          sched.Speculation
		main, other int
	}{
		{sched.Speculation{}, 0, 0},
		{sched.Speculation{Type: sched.SpecNone, DraftMax: 6}, 0, 0},
		{sched.Speculation{Type: sched.SpecNgramSimple}, sched.DefaultDraftMax, sched.DefaultDraftMax},
		{sched.Speculation{Type: sched.SpecNgramSimple, DraftMax: 6}, 6, 6},
		{sched.Speculation{Type: sched.SpecDraftSimple, DraftMax: 3}, 3, 0},
		{sched.Speculation{Type: sched.SpecDraftMTP, DraftMax: 2}, 2, 0},
	}
	for _, c := range cases {
		o := Options{ModelPath: main.Path}
		o.Sched.Speculation = c.sp
		if got := draftBound(main, o); got != c.main {
			t.Errorf("%+v: the default model opened with a bound of %d, want %d", c.sp, got, c.main)
		}
		if got := draftBound(other, o); got != c.other {
			t.Errorf("%+v: another model opened with a bound of %d, want %d", c.sp, got, c.other)
		}
	}
}
