package engine

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

func TestTextStreamHoldsSplitCharacters(t *testing.T) {
	euro := []byte("€") // E2 82 AC
	var s TextStream
	var out []byte
	out = s.Push(out, []byte("a"))
	out = s.Push(out, euro[:1])
	if string(out) != "a" || s.Pending() != 1 {
		t.Fatalf("after lead byte: %q pending %d", out, s.Pending())
	}
	out = s.Push(out, euro[1:2])
	if string(out) != "a" {
		t.Fatalf("emitted half a character: %q", out)
	}
	out = s.Push(out, append(euro[2:3:3], 'b'))
	if string(out) != "a€b" || s.Pending() != 0 {
		t.Fatalf("got %q pending %d", out, s.Pending())
	}
}

func TestTextStreamReplacesInvalidBytes(t *testing.T) {
	var s TextStream
	out := s.Push(nil, []byte{'x', 0xFF, 'y', 0x80})
	out = s.Flush(out)
	if string(out) != "x\uFFFDy\uFFFD" {
		t.Fatalf("got %q", out)
	}
	// A lead byte followed by a byte that cannot continue it is not held.
	out = s.Push(nil, []byte{0xE0, 0x41})
	if string(out) != "\uFFFDA" {
		t.Fatalf("got %q", out)
	}
	// A stream ending inside a character flushes a replacement.
	out = s.Push(nil, []byte{0xF0, 0x9F})
	if len(out) != 0 {
		t.Fatalf("emitted %q early", out)
	}
	out = s.Flush(out)
	if !utf8.Valid(out) || !bytes.Contains(out, []byte("\uFFFD")) {
		t.Fatalf("flush gave %q", out)
	}
}

func FuzzTextStream(f *testing.F) {
	f.Add([]byte("hello €"), 3)
	f.Add([]byte{0xF0, 0x9F, 0x98, 0x80, 0xC3}, 1)
	f.Fuzz(func(t *testing.T, b []byte, split int) {
		var s TextStream
		var out []byte
		if split < 1 {
			split = 1
		}
		for i := 0; i < len(b); i += split {
			end := min(i+split, len(b))
			out = s.Push(out, b[i:end])
			if !utf8.Valid(out) {
				t.Fatalf("invalid output %q", out)
			}
		}
		out = s.Flush(out)
		if !utf8.Valid(out) {
			t.Fatalf("invalid output %q", out)
		}
		if utf8.Valid(b) && !bytes.Equal(out, b) {
			t.Fatalf("valid input %q came out as %q", b, out)
		}
	})
}

func BenchmarkTextStream(b *testing.B) {
	var s TextStream
	out := make([]byte, 0, 64)
	piece := []byte(" token")
	b.ReportAllocs()
	for b.Loop() {
		out = s.Push(out[:0], piece)
	}
}
