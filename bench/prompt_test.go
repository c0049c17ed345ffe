package bench

import (
	"strings"
	"testing"
)

func TestProseIsDeterministicPerSeedStreamAndIndex(t *testing.T) {
	a := Prose(7, streamSystem, 3, 500)
	if b := Prose(7, streamSystem, 3, 500); a != b {
		t.Fatal("same seed, stream and index gave different text")
	}
	for name, other := range map[string]string{
		"seed":   Prose(8, streamSystem, 3, 500),
		"stream": Prose(7, streamDecode, 3, 500),
		"index":  Prose(7, streamSystem, 4, 500),
	} {
		if other == a {
			t.Errorf("a different %s gave the same text", name)
		}
	}
	if n := len(strings.Fields(a)); n != 500 {
		t.Fatalf("%d words, want 500", n)
	}
	if !strings.HasSuffix(a, ".") || strings.ToUpper(a[:1]) != a[:1] || !strings.Contains(a, "\n\n") {
		t.Fatalf("not sentence-shaped: %.120q…", a)
	}
	// A longer text starts with the shorter one: sizes change the length,
	// not the opening, so prompts of two sizes share their prefix.
	if !strings.HasPrefix(Prose(7, streamSystem, 3, 800), strings.TrimSuffix(a[:200], ".")) {
		t.Fatal("a longer prose does not start like the shorter one")
	}
}

func TestCodeLinesAndQuestions(t *testing.T) {
	lines := CodeLines(1, streamCode, 0, 37)
	if len(lines) != 37 || !strings.HasPrefix(lines[0], "def ") {
		t.Fatalf("%d lines, first %q", len(lines), lines[0])
	}
	if strings.Join(lines, "\n") != strings.Join(CodeLines(1, streamCode, 0, 37), "\n") {
		t.Fatal("code is not deterministic")
	}
	if Question(1, streamQuestion, 0) != Question(1, streamQuestion, 0) || Question(1, streamQuestion, 0) == Question(1, streamQuestion, 1) {
		t.Fatal("questions: same index must repeat, another index differ")
	}
	if cursorLine(1, 0) == cursorLine(1, 1) {
		t.Fatal("FIM cursor lines must differ per request")
	}
}

func TestSizerTurnsTokensIntoWords(t *testing.T) {
	s := sizer{TokensPerWord: 2, TokensPerLine: 10}
	if s.words(2000) != 1000 || s.lines(500) != 50 || s.words(0) != 1 {
		t.Fatalf("words(2000)=%d lines(500)=%d words(0)=%d", s.words(2000), s.lines(500), s.words(0))
	}
}
