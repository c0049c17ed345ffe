package task

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// searchStops is the matcher's specification, written the plain way: the
// held-back text and the new text are searched for every stop, the match
// that starts first wins, and what is held back is the longest suffix that
// is a proper prefix of some stop.
type searchStops struct {
	stops   []string
	pending string
}

func (m *searchStops) push(text string) (shown, hit string) {
	m.pending += text
	first, which := -1, ""
	for _, s := range m.stops {
		if s == "" {
			continue
		}
		if i := strings.Index(m.pending, s); i >= 0 && (first < 0 || i < first) {
			first, which = i, s
		}
	}
	if first >= 0 {
		shown, m.pending = m.pending[:first], ""
		return shown, which
	}
	keep := 0
	for _, s := range m.stops {
		for k := min(len(s)-1, len(m.pending)); k > keep; k-- {
			if strings.HasSuffix(m.pending, s[:k]) {
				keep = k
				break
			}
		}
	}
	shown, m.pending = m.pending[:len(m.pending)-keep], m.pending[len(m.pending)-keep:]
	return shown, ""
}

func TestStopMatcherCases(t *testing.T) {
	cases := []struct {
		stops  []string
		pieces []string
		want   string // what is shown, then "|" and the stop hit, if any
	}{
		{[]string{"END"}, []string{"ab", "cE", "N", "D", "x"}, "abc|END"},
		{[]string{"END"}, []string{"ab", "cE", "N", "d"}, "abcENd"},
		{[]string{"abcd", "bc"}, []string{"a", "b", "c"}, "a|bc"},
		{[]string{"abcd", "bc"}, []string{"abcd"}, "|abcd"}, // the one that starts first
		{[]string{"bc", "abcd"}, []string{"ab", "cd"}, "|abcd"},
		{[]string{"aab"}, []string{"a", "a", "a", "a", "b"}, "aa|aab"},
		{[]string{"ababc"}, []string{"abab", "abab", "c"}, "abab|ababc"},
		{[]string{"", "x"}, []string{"ax"}, "a|x"},
		{[]string{"é!"}, []string{"caf", "é", "é", "!"}, "café|é!"},
		{[]string{"\n\n"}, []string{"one\n", "two\n", "\n"}, "one\ntwo|\n\n"},
		{nil, []string{"a", "b"}, "ab"},
	}
	for _, c := range cases {
		m := NewStopMatcher(c.stops)
		var got []byte
		hit := ""
		for _, p := range c.pieces {
			got, hit = m.Push(got, []byte(p))
			if hit != "" {
				break
			}
		}
		if hit == "" {
			got = m.Flush(got)
		} else {
			got = append(got, "|"+hit...)
		}
		if string(got) != c.want {
			t.Errorf("stops %q, pieces %q: %q, want %q", c.stops, c.pieces, got, c.want)
		}
	}
}

// TestStopMatcherAgreesWithSearch streams random text in random pieces over
// small alphabets (where prefixes, borders and overlapping stops are
// common) and checks every push against the plain search.
func TestStopMatcherAgreesWithSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(alphabet string, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for trial := range 20000 {
		alphabet := "ab"[:1+r.IntN(2)] + "c"[:r.IntN(2)]
		stops := make([]string, 1+r.IntN(4))
		for i := range stops {
			stops[i] = word(alphabet, r.IntN(6))
		}
		m, ref := NewStopMatcher(stops), &searchStops{stops: stops}
		var got, want []byte
		for step := 0; step < 12; step++ {
			piece := word(alphabet, r.IntN(5))
			var g []byte
			var gh string
			g, gh = m.Push(nil, []byte(piece))
			w, wh := ref.push(piece)
			got, want = append(got, g...), append(want, w...)
			if string(g) != w || gh != wh {
				t.Fatalf("trial %d, stops %q, after %q: shown %q hit %q, want %q hit %q", trial, stops, want, g, gh, w, wh)
			}
			if gh != "" {
				break
			}
		}
		if held, wantHeld := string(m.Flush(nil)), ref.pending; held != wantHeld {
			t.Fatalf("trial %d, stops %q: flushed %q, want %q", trial, stops, held, wantHeld)
		}
	}
}

// TestStopMatcherHoldsBackLessThanAStop streams a long text that keeps
// almost matching a long stop: what is held back never exceeds the stop's
// length less a byte, and the buffer does not grow with the text.
func TestStopMatcherHoldsBackLessThanAStop(t *testing.T) {
	stop := strings.Repeat("a", MaxStopBytes-1) + "b"
	m := NewStopMatcher([]string{stop})
	shown := 0
	for i := range 100000 {
		out, hit := m.Push(nil, []byte("a"))
		if hit != "" {
			t.Fatalf("hit %q at byte %d", hit, i)
		}
		shown += len(out)
		if held := len(m.pending) - m.from; held > len(stop)-1 {
			t.Fatalf("held %d bytes at byte %d, stop is %d", held, i, len(stop))
		}
	}
	if want := 100000 - (len(stop) - 1); shown != want {
		t.Errorf("shown %d bytes, want %d", shown, want)
	}
	if cap(m.pending) > 4*len(stop) {
		t.Errorf("the buffer grew to %d bytes for a %d-byte stop", cap(m.pending), len(stop))
	}
}

// BenchmarkStopMatcher streams one-token pieces of text that keeps almost
// matching every stop (the worst case for holding back) past 16 stops of
// 10 bytes, 16 of the largest total a request may send, and 16 of the
// largest single stop (past what a request may send, to show the cost
// does not follow the length): ns/op is per token, about equal for all.
func BenchmarkStopMatcher(b *testing.B) {
	for _, each := range []int{10, MaxStopsBytes / MaxStops, MaxStopBytes} {
		b.Run(fmt.Sprintf("16x%d", each), func(b *testing.B) {
			stops := make([]string, MaxStops)
			for i := range stops {
				stops[i] = strings.Repeat("ab", each/2-1) + "a" + string(rune('c'+i))
			}
			m := NewStopMatcher(stops)
			token := []byte("ab")
			var dst []byte
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				var hit string
				dst, hit = m.Push(dst[:0], token)
				if hit != "" {
					b.Fatal("hit", hit)
				}
			}
		})
	}
}
