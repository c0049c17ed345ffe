package task

// Stop strings: their bounds, checked when a request is read, and the
// matcher that finds them in generated text as it streams.
//
// Bounds. Every API takes at most MaxStops stop strings (OpenAI documents
// 4, Anthropic none, llama-server and Ollama none; 16 keeps every client
// we know of served, Anthropic keeps its older 64, a bound of its own). Each is at most
// MaxStopBytes and all of them together at most MaxStopsBytes: real stop
// strings are a role marker, a fence or a few words, and 4 KiB is far past
// any of them. What these bound is memory, not time — the matcher's
// per-token cost does not depend on the stops' length — a request holds
// at most 4 bytes of failure table per byte of stop, and at most one stop's
// length of held-back text.

const (
	MaxStops      = 16
	MaxStopBytes  = 4096
	MaxStopsBytes = 16 << 10
)

// CheckStops refuses stop strings past the bounds above, naming field (the
// API's own name for it) in the 400.
func CheckStops(field string, stops []string, maxCount int) error {
	if len(stops) > maxCount {
		return BadParam(field, "%s: at most %d stop sequences, got %d", field, maxCount, len(stops))
	}
	total := 0
	for i, s := range stops {
		if len(s) > MaxStopBytes {
			return BadParam(field, "%s[%d]: a stop sequence is at most %d bytes, got %d", field, i, MaxStopBytes, len(s))
		}
		total += len(s)
	}
	if total > MaxStopsBytes {
		return BadParam(field, "%s: the stop sequences are at most %d bytes together, got %d", field, MaxStopsBytes, total)
	}
	return nil
}

// StopMatcher finds stop strings in generated text as it streams. Text that
// could be the beginning of a stop string is held back until the next
// piece shows whether it is, so a client never sees part of a stop string.
//
// Each stop runs its own Knuth–Morris–Pratt automaton over bytes: its state
// is how many of the stop's first bytes the text now ends with, and a byte
// moves it in amortized constant time. So a token costs its own length
// times the number of stops, whatever the stops' length, and the held-back
// text is the longest of those states — never more than one stop's length
// less a byte. Text arrives whole UTF-8 characters (engine.TextStream), and
// a held-back suffix begins where a stop begins, on a character, so what
// is shown always ends on one.
type StopMatcher struct {
	stops []stopAutomaton
	// pending[from:] is the held-back text; from moves on as text is
	// shown, and the buffer is compacted once more than half is dead, so
	// each byte is copied a bounded number of times.
	pending []byte
	from    int
}

type stopAutomaton struct {
	text  string
	fail  []int32 // fail[k]: the longest proper border of text[:k+1]
	state int     // bytes of text the input now ends with
}

func NewStopMatcher(stops []string) *StopMatcher {
	m := &StopMatcher{}
	for _, s := range stops {
		if s != "" {
			m.stops = append(m.stops, stopAutomaton{text: s, fail: borders(s)})
		}
	}
	return m
}

// borders is KMP's failure function of s.
func borders(s string) []int32 {
	fail := make([]int32, len(s))
	k := int32(0)
	for i := 1; i < len(s); i++ {
		for k > 0 && s[i] != s[k] {
			k = fail[k-1]
		}
		if s[i] == s[k] {
			k++
		}
		fail[i] = k
	}
	return fail
}

// step feeds one byte and reports whether the stop is now complete.
func (a *stopAutomaton) step(c byte) bool {
	k := a.state
	if k == len(a.text) { // a match was reported: continue past it
		k = int(a.fail[k-1])
	}
	for k > 0 && a.text[k] != c {
		k = int(a.fail[k-1])
	}
	if a.text[k] == c {
		k++
	}
	a.state = k
	return k == len(a.text)
}

// Push adds text and appends to dst what is safe to show. hit reports a
// stop string: dst then ends just before it and the rest is dropped. When
// several stops complete within one Push, the one that starts first wins
// (the first listed, at equal starts), as a search of the held-back text
// and the new text for each stop would find.
func (m *StopMatcher) Push(dst, text []byte) (out []byte, hit string) {
	if len(m.stops) == 0 {
		return append(dst, text...), ""
	}
	held := len(m.pending) - m.from
	m.pending = append(m.pending, text...)
	first, which := -1, -1 // the match's start, counted from m.from
	for j := range m.stops {
		a := &m.stops[j]
		for i, c := range text {
			if a.step(c) {
				start := held + i + 1 - len(a.text)
				if first < 0 || start < first {
					first, which = start, j
				}
				break // a later match of the same stop starts later
			}
		}
	}
	if which >= 0 {
		dst = append(dst, m.pending[m.from:m.from+first]...)
		m.reset()
		return dst, m.stops[which].text
	}
	keep := 0
	for j := range m.stops {
		keep = max(keep, m.stops[j].state)
	}
	show := len(m.pending) - keep
	dst = append(dst, m.pending[m.from:show]...)
	m.from = show
	if m.from > len(m.pending)-m.from {
		n := copy(m.pending, m.pending[m.from:])
		m.pending, m.from = m.pending[:n], 0
	}
	return dst, ""
}

// Flush appends what is held back: the text ended without a stop string.
func (m *StopMatcher) Flush(dst []byte) []byte {
	dst = append(dst, m.pending[m.from:]...)
	m.reset()
	return dst
}

func (m *StopMatcher) reset() {
	m.pending, m.from = m.pending[:0], 0
	for j := range m.stops {
		m.stops[j].state = 0
	}
}
