package fim

import "testing"

// Each family's exact token layout, file-level and with context.
func TestFamilyLayouts(t *testing.T) {
	r := Request{Prefix: "def f(", Suffix: "\n    return x", Prompt: "a, b"}
	cases := []struct {
		name   string
		v      vocab
		family Family
		order  Order
		want   string
	}{
		{"qwen", qwenVocab, Qwen, PSM, "<|fim_prefix|>def f(a, b<|fim_suffix|>\n    return x<|fim_middle|>"},
		{"starcoder", starVocab, StarCoder, PSM, "<fim_prefix>def f(a, b<fim_suffix>\n    return x<fim_middle>"},
		{"codellama", llamaVocab, CodeLlama, PSM, "<s>▁<PRE>def f(a, b▁<SUF>\n    return x▁<MID>"},
		{"deepseek", deepseekVocab, DeepSeek, PSM,
			"<｜begin▁of▁sentence｜><｜fim▁begin｜>def f(a, b<｜fim▁hole｜>\n    return x<｜fim▁end｜>"},
		// Codestral (mistral-common encode_fim): suffix first, no [MIDDLE].
		{"mistral", mistralVocab, Mistral, SPM, "<s>[SUFFIX]\n    return x[PREFIX]def f(a, b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := builderFor(t, c.v)
			if !b.Capable() || b.Family() != c.family || b.Order() != c.order {
				t.Fatalf("capable %v family %v order %v", b.Capable(), b.Family(), b.Order())
			}
			got, info := build(t, b, c.v, r, 1000)
			if got != c.want {
				t.Errorf("layout\n got %q\nwant %q", got, c.want)
			}
			if info.Truncated() || info.RepoLevel {
				t.Errorf("info %+v", info)
			}
		})
	}
}

func TestEmptyPrefixAndSuffix(t *testing.T) {
	for _, c := range []struct {
		v    vocab
		want string
	}{
		{qwenVocab, "<|fim_prefix|><|fim_suffix|><|fim_middle|>"},
		{mistralVocab, "<s>[SUFFIX][PREFIX]"},
		{llamaVocab, "<s>▁<PRE>▁<SUF>▁<MID>"},
	} {
		b := builderFor(t, c.v)
		if got, _ := build(t, b, c.v, Request{}, 10); got != c.want {
			t.Errorf("%v: got %q want %q", b.Family(), got, c.want)
		}
		// The markers alone fit exactly.
		if got, _ := build(t, b, c.v, Request{Prefix: "x", Suffix: "y"}, b.fixed()); got != c.want {
			t.Errorf("%v at budget %d: got %q", b.Family(), b.fixed(), got)
		}
	}
}

var twoFiles = []File{{Name: "a.go", Text: "A"}, {Name: "b.go", Text: "B\n"}}

// Qwen2.5-Coder's repository-level format (arXiv:2409.12186), as llama.cpp
// lays it out, with a newline closing each file.
func TestQwenRepoLevel(t *testing.T) {
	b := builderFor(t, qwenVocab)
	r := Request{Prefix: "p", Suffix: "s", Extra: twoFiles, RepoName: "proj", Filename: "main.go"}
	got, info := build(t, b, qwenVocab, r, 1000)
	want := "<|repo_name|>proj\n<|file_sep|>a.go\nA\n<|file_sep|>b.go\nB\n<|file_sep|>main.go\n" +
		"<|fim_prefix|>p<|fim_suffix|>s<|fim_middle|>"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if !info.RepoLevel || info.Extra != 2 || info.ExtraDropped != 0 || info.ExtraTokens != 31 {
		// 4 markers + "proj\n" 5 + "a.go\nA\n" 7 + "b.go\nB\n" 7 + "main.go\n" 8
		t.Errorf("info %+v", info)
	}
	// No names: llama.cpp's placeholders.
	got, _ = build(t, b, qwenVocab, Request{Prefix: "p", Extra: []File{{Text: "X"}}}, 1000)
	want = "<|repo_name|>myproject\n<|file_sep|>tmp\nX\n<|file_sep|>filename\n<|fim_prefix|>p<|fim_suffix|><|fim_middle|>"
	if got != want {
		t.Fatalf("defaults: got %q\nwant %q", got, want)
	}
}

// StarCoder2's layout (arXiv:2402.19173): no newline after the repository
// name, and the current file's path opens the prefix.
func TestStarCoderRepoLevel(t *testing.T) {
	b := builderFor(t, starVocab)
	r := Request{Prefix: "p", Suffix: "s", Extra: twoFiles, RepoName: "proj", Filename: "main.go"}
	got, info := build(t, b, starVocab, r, 1000)
	want := "<repo_name>proj<file_sep>a.go\nA\n<file_sep>b.go\nB\n<file_sep><fim_prefix>main.go\np<fim_suffix>s<fim_middle>"
	if got != want || !info.RepoLevel {
		t.Fatalf("got  %q\nwant %q (%+v)", got, want, info)
	}
}

// CodeQwen1.5 pairs <fim_prefix> with <reponame>: Qwen's newline layout.
func TestCodeQwenRepoLevel(t *testing.T) {
	v := vocab{specials: []string{"<|endoftext|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>",
		"<fim_pad>", "<reponame>", "<file_sep>"}}
	b := builderFor(t, v)
	got, _ := build(t, b, v, Request{Prefix: "p", Extra: twoFiles[:1], RepoName: "r", Filename: "f"}, 1000)
	want := "<reponame>r\n<file_sep>a.go\nA\n<file_sep>f\n<fim_prefix>p<fim_suffix><fim_middle>"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

// Without a file separator the chunks follow llama.cpp's snippet lines,
// after BOS (llama.cpp puts them before it) and before the first marker.
func TestSnippetContext(t *testing.T) {
	b := builderFor(t, deepseekVocab)
	if b.RepoLevel() {
		t.Fatal("DeepSeek has no repository tokens")
	}
	got, info := build(t, b, deepseekVocab, Request{Prefix: "p", Suffix: "s", Extra: twoFiles, RepoName: "x", Filename: "y"}, 1000)
	want := "<｜begin▁of▁sentence｜>\n\n--- snippet ---\n\nA\n\n--- snippet ---\n\nB\n<｜fim▁begin｜>p<｜fim▁hole｜>s<｜fim▁end｜>"
	if got != want || info.RepoLevel || info.Extra != 2 {
		t.Fatalf("got  %q\nwant %q (%+v)", got, want, info)
	}
	b = builderFor(t, mistralVocab)
	got, _ = build(t, b, mistralVocab, Request{Prefix: "p", Suffix: "s", Extra: twoFiles[:1]}, 1000)
	if want := "<s>\n\n--- snippet ---\n\nA[SUFFIX]s[PREFIX]p"; got != want {
		t.Fatalf("SPM: got %q want %q", got, want)
	}
}

// A filename alone (Continue sends no other files) still gets the frame.
func TestFilenameOnly(t *testing.T) {
	b := builderFor(t, qwenVocab)
	got, info := build(t, b, qwenVocab, Request{Prefix: "p", Filename: "x.py"}, 1000)
	want := "<|repo_name|>myproject\n<|file_sep|>x.py\n<|fim_prefix|>p<|fim_suffix|><|fim_middle|>"
	if got != want || !info.RepoLevel {
		t.Fatalf("got %q (%+v)", got, info)
	}
}
