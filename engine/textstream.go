package engine

import "unicode/utf8"

// TextStream turns token pieces into text as they arrive without ever
// emitting half a character: a piece may end inside a multi-byte UTF-8
// sequence (byte-fallback tokens do), so the incomplete tail is held until
// the next piece completes it. Bytes that can never form a valid sequence
// are emitted as U+FFFD, so the output is always valid UTF-8.
type TextStream struct {
	held []byte
}

// Push appends piece's completed text to dst and returns it.
func (s *TextStream) Push(dst, piece []byte) []byte {
	s.held = append(s.held, piece...)
	n := completePrefix(s.held)
	dst = appendValid(dst, s.held[:n])
	s.held = append(s.held[:0], s.held[n:]...)
	return dst
}

// Flush appends whatever is held (as replacement characters: the stream
// ended inside a character) and empties the stream.
func (s *TextStream) Flush(dst []byte) []byte {
	dst = appendValid(dst, s.held)
	s.held = s.held[:0]
	return dst
}

// Pending reports how many bytes are held back.
func (s *TextStream) Pending() int { return len(s.held) }

// Reset drops anything held.
func (s *TextStream) Reset() { s.held = s.held[:0] }

// completePrefix returns the length of b without a trailing sequence that is
// incomplete but could still become valid.
func completePrefix(b []byte) int {
	for back := 1; back <= 3 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < 0x80 {
			return len(b)
		}
		if c < 0xC0 {
			continue // continuation byte: look further back for the lead
		}
		need := 0
		switch {
		case c >= 0xF0 && c <= 0xF4:
			need = 4
		case c >= 0xE0:
			need = 3
		case c >= 0xC2:
			need = 2
		}
		if need > back && !utf8.FullRune(b[len(b)-back:]) && validSoFar(b[len(b)-back:]) {
			return len(b) - back
		}
		return len(b)
	}
	return len(b)
}

// validSoFar reports whether an incomplete sequence could still be valid
// (its second byte respects the lead's range).
func validSoFar(seq []byte) bool {
	if len(seq) < 2 {
		return true
	}
	lead, second := seq[0], seq[1]
	switch lead {
	case 0xE0:
		return second >= 0xA0 && second <= 0xBF
	case 0xED:
		return second >= 0x80 && second <= 0x9F
	case 0xF0:
		return second >= 0x90 && second <= 0xBF
	case 0xF4:
		return second >= 0x80 && second <= 0x8F
	}
	return second >= 0x80 && second <= 0xBF
}

// appendValid appends b with each invalid byte replaced by U+FFFD.
func appendValid(dst, b []byte) []byte {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, "\uFFFD"...)
		} else {
			dst = append(dst, b[:size]...)
		}
		b = b[size:]
	}
	return dst
}
