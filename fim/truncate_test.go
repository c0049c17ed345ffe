package fim

import (
	"errors"
	"strings"
	"testing"
)

func digits(c byte, n int) string { return strings.Repeat(string(c), n) }

// Under a small budget the prefix keeps its end and the suffix its start,
// 3:1, as in llama.cpp.
func TestTruncationKeepsTextNearestTheCursor(t *testing.T) {
	b := builderFor(t, qwenVocab)
	r := Request{Prefix: "START" + digits('p', 90) + "prefix-end", Suffix: "suffix-start" + digits('s', 88)}
	got, info := build(t, b, qwenVocab, r, 3+20)
	want := "<|fim_prefix|>ppppp" + "prefix-end" + "<|fim_suffix|>suffi<|fim_middle|>"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if info.Prefix != 15 || info.PrefixDropped != 90 || info.Suffix != 5 || info.SuffixDropped != 95 || !info.Truncated() {
		t.Fatalf("info %+v", info)
	}
}

// A side shorter than its share leaves the rest to the other.
func TestShortSideLendsItsShare(t *testing.T) {
	b := builderFor(t, qwenVocab)
	_, info := build(t, b, qwenVocab, Request{Prefix: digits('p', 100), Suffix: "ab"}, 3+20)
	if info.Prefix != 18 || info.Suffix != 2 {
		t.Fatalf("short suffix: %+v", info)
	}
	_, info = build(t, b, qwenVocab, Request{Prefix: "ab", Suffix: digits('s', 100)}, 3+20)
	if info.Prefix != 2 || info.Suffix != 18 {
		t.Fatalf("short prefix: %+v", info)
	}
}

// The prompt (typed after the prefix) is nearest the cursor: it is served
// first and, if even it is too long, keeps its end.
func TestPromptFirst(t *testing.T) {
	b := builderFor(t, qwenVocab)
	got, info := build(t, b, qwenVocab, Request{Prefix: "pre", Suffix: "suf", Prompt: digits('q', 25) + "abcde"}, 3+20)
	if want := "<|fim_prefix|>" + digits('q', 15) + "abcde<|fim_suffix|><|fim_middle|>"; got != want {
		t.Fatalf("got %q", got)
	}
	if info.PromptDropped != 10 || info.PrefixDropped != 3 || info.SuffixDropped != 3 {
		t.Fatalf("info %+v", info)
	}
}

// The window bounds prefix+suffix until the extra context is served; the
// extra context keeps its last chunks whole; what it leaves goes back.
func TestWindowAndExtraBudget(t *testing.T) {
	b := builderFor(t, qwenVocab)
	file := func(n byte) File { return File{Name: "f" + string(n) + ".go", Text: digits(n, 20)} }
	r := Request{
		Prefix: digits('p', 100), Suffix: digits('s', 100), RepoName: "proj", Filename: "main.go",
		Extra: []File{file('1'), file('2'), file('3')}, Window: 40,
	}
	// 3 markers + 40 window + frame 15 + two chunks of 28 + 10 spare.
	got, info := build(t, b, qwenVocab, r, 3+40+15+56+10)
	if info.Extra != 2 || info.ExtraDropped != 1 || info.ExtraTokens != 15+56 || !info.RepoLevel {
		t.Fatalf("info %+v", info)
	}
	if strings.Contains(got, "f1.go") || !strings.Contains(got, "<|file_sep|>f2.go\n22222222222222222222\n<|file_sep|>f3.go\n") {
		t.Fatalf("wrong chunks kept: %q", got)
	}
	// The 10 spare tokens went back to prefix and suffix: 50 at 3:1.
	if info.Prefix != 38 || info.Suffix != 12 {
		t.Fatalf("spare not returned: %+v", info)
	}
	// No room for the frame: file-level format, all chunks dropped.
	got, info = build(t, b, qwenVocab, r, 3+40+14)
	if info.RepoLevel || info.ExtraDropped != 3 || strings.Contains(got, "<|file_sep|>") || info.Prefix+info.Suffix != 54 {
		t.Fatalf("frame should not fit: %q %+v", got, info)
	}
	// Nothing else to serve: the whole budget is local.
	_, info = build(t, b, qwenVocab, Request{Prefix: digits('p', 100), Suffix: digits('s', 100), Window: 10}, 103)
	if info.Prefix != 75 || info.Suffix != 25 {
		t.Fatalf("window should not cap a request without context: %+v", info)
	}
}

// StarCoder2's current path stays at the head of the prefix section while
// the prefix is cut.
func TestStarCoderPathSurvivesTruncation(t *testing.T) {
	b := builderFor(t, starVocab)
	r := Request{Prefix: digits('p', 50), Filename: "x.go", RepoName: "r", Window: 10}
	got, info := build(t, b, starVocab, r, 3+2+1+5+10) // markers, repo frame, path, 10 left
	if want := "<repo_name>r<file_sep><fim_prefix>x.go\n" + digits('p', 10) + "<fim_suffix><fim_middle>"; got != want {
		t.Fatalf("got %q want %q (%+v)", got, want, info)
	}
}

func TestBudgetBelowMarkers(t *testing.T) {
	for _, v := range []vocab{qwenVocab, mistralVocab, llamaVocab} {
		b := builderFor(t, v)
		for _, budget := range []int{-5, 0, b.fixed() - 1} {
			if _, _, err := b.Build(byteTok{}, Request{Prefix: "x"}, budget); !errors.Is(err, ErrBudget) {
				t.Errorf("%v budget %d: err %v", b.Family(), budget, err)
			}
		}
	}
}
