package bench

import "testing"

// A run's verdict fails it for no success, any failure or a soak problem,
// and never for an interrupted run, which reports what it measured.
func TestVerdict(t *testing.T) {
	ok := Phase{Requests: Counts{OK: 3}}
	for _, tc := range []struct {
		name string
		rep  Report
		want string // "" for no error
	}{
		{"clean", Report{Phase: ok}, ""},
		{"interrupted with nothing", Report{Interrupted: true, Failures: &Failures{Count: 2, FirstError: "x"}}, ""},
		{"nothing succeeded", Report{}, "bench: no measured request succeeded"},
		{"nothing succeeded, first error", Report{Failures: &Failures{Count: 1, FirstError: "refused"}}, "bench: no measured request succeeded (first: refused)"},
		{"some failed", Report{Phase: ok, Failures: &Failures{Count: 2, FirstError: "timeout"}}, "bench: 2 requests failed (first: timeout)"},
		{"soak problems", Report{Phase: ok, Soak: &SoakReport{Problems: []string{"a 500", "lanes busy"}}}, "bench: soak: a 500; lanes busy"},
		{"soak clean", Report{Phase: ok, Soak: &SoakReport{}}, ""},
	} {
		err := tc.rep.Verdict()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want none", tc.name, err)
		case tc.want != "" && (err == nil || err.Error() != tc.want):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
