package http

import "strings"

// stopMatcher finds stop strings in generated text as it streams. Text that
// could be the beginning of a stop string is held back until the next
// piece shows whether it is, so a client never sees part of a stop string.
type stopMatcher struct {
	stops   []string
	pending []byte
}

func newStopMatcher(stops []string) *stopMatcher {
	var keep []string
	for _, s := range stops {
		if s != "" {
			keep = append(keep, s)
		}
	}
	return &stopMatcher{stops: keep}
}

// push adds text and appends to dst what is safe to show. hit reports a
// stop string: dst then ends just before it and the rest is dropped.
func (m *stopMatcher) push(dst, text []byte) (out []byte, hit string) {
	if len(m.stops) == 0 {
		return append(dst, text...), ""
	}
	m.pending = append(m.pending, text...)
	first, which := -1, ""
	for _, s := range m.stops {
		if i := strings.Index(string(m.pending), s); i >= 0 && (first < 0 || i < first) {
			first, which = i, s
		}
	}
	if first >= 0 {
		dst = append(dst, m.pending[:first]...)
		m.pending = m.pending[:0]
		return dst, which
	}
	keep := m.heldBack()
	dst = append(dst, m.pending[:len(m.pending)-keep]...)
	m.pending = append(m.pending[:0], m.pending[len(m.pending)-keep:]...)
	return dst, ""
}

// heldBack is the length of the longest suffix of pending that is a proper
// prefix of some stop string.
func (m *stopMatcher) heldBack() int {
	best := 0
	for _, s := range m.stops {
		for k := min(len(s)-1, len(m.pending)); k > best; k-- {
			if strings.HasSuffix(string(m.pending), s[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// flush appends what is held back: the text ended without a stop string.
func (m *stopMatcher) flush(dst []byte) []byte {
	dst = append(dst, m.pending...)
	m.pending = m.pending[:0]
	return dst
}
