package fim

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"text/template"

	"superfluid/engine"
)

var noFIM = engine.FIM{Prefix: -1, Suffix: -1, Middle: -1, Pad: -1, RepoName: -1, FileSep: -1}

func TestNoFIMTokens(t *testing.T) {
	v := plainVocab
	b, err := NewBuilder(Config{FIM: noFIM, TokenText: v.text, NumTokens: v.size(), BOS: v.bos, AddBOS: true})
	if !errors.Is(err, ErrNoFIM) || !strings.HasPrefix(err.Error(), "fim: ") {
		t.Fatalf("err %v", err)
	}
	if b == nil || b.Capable() || b.Family() != None || b.StopTokens() != nil {
		t.Fatalf("builder %+v", b)
	}
	if strings.Contains(b.Template(), ".Suffix") {
		t.Fatalf("template %q offers FIM", b.Template())
	}
	if _, _, err := b.Build(byteTok{}, Request{Prefix: "x"}, 100); !errors.Is(err, ErrNoFIM) {
		t.Fatalf("Build err %v", err)
	}
}

// Two of the three markers are not enough for a PSM family.
func TestMissingMiddleIsNotCapable(t *testing.T) {
	f := noFIM
	f.Prefix, f.Suffix = 1, 3
	b, err := NewBuilder(Config{FIM: f, TokenText: qwenVocab.text}) // no NumTokens: no lookup
	if !errors.Is(err, ErrNoFIM) || b.Capable() {
		t.Fatalf("err %v capable %v", err, b.Capable())
	}
}

// llama.cpp names neither Codestral's markers nor StarCoder2's repository
// tokens; the builder finds them by text when it knows the vocabulary size.
func TestLookupFillsWhatLlamaCppMisses(t *testing.T) {
	fm := llamaCppFIM(mistralVocab.size(), mistralVocab.text)
	if fm != noFIM {
		t.Fatalf("llama.cpp's rules found %+v in Codestral's vocabulary", fm)
	}
	if _, err := NewBuilder(Config{FIM: fm, TokenText: mistralVocab.text}); !errors.Is(err, ErrNoFIM) {
		t.Fatalf("without lookup: %v", err)
	}
	b := builderFor(t, mistralVocab)
	if got := b.Tokens(); got.Prefix != 5 || got.Middle != 6 || got.Suffix != 7 {
		t.Fatalf("mistral ids %+v", got)
	}

	fs := llamaCppFIM(starVocab.size(), starVocab.text)
	if fs.RepoName != -1 || fs.FileSep != -1 || fs.Prefix != 1 {
		t.Fatalf("llama.cpp's rules on StarCoder2: %+v", fs)
	}
	nolook, err := NewBuilder(Config{FIM: fs, TokenText: starVocab.text})
	if err != nil || nolook.RepoLevel() {
		t.Fatalf("without lookup: err %v repo %v", err, nolook.RepoLevel())
	}
	b = builderFor(t, starVocab)
	if got := b.Tokens(); got.RepoName != 5 || got.FileSep != 6 || !b.RepoLevel() {
		t.Fatalf("starcoder ids %+v", got)
	}
	if got := b.StopTokens(); !slices.Equal(got, []engine.Token{1, 3, 2, 4, 5, 6}) {
		t.Fatalf("stop tokens %v", got)
	}
}

// With no ids at all, the family and every id come from the texts.
func TestDetectFromScratch(t *testing.T) {
	for _, v := range []vocab{qwenVocab, starVocab, llamaVocab, deepseekVocab, mistralVocab} {
		want := builderFor(t, v)
		got, err := NewBuilder(Config{FIM: noFIM, TokenText: v.text, NumTokens: v.size(), BOS: v.bos, AddBOS: v.addBOS})
		if err != nil || got.Family() != want.Family() || got.Tokens() != want.Tokens() {
			t.Errorf("%v: got %v %+v err %v, want %+v", want.Family(), got.Family(), got.Tokens(), err, want.Tokens())
		}
	}
}

// Ids given (GGUF metadata) win over texts, and texts of no known family
// get llama-server's default PSM layout.
func TestGenericFamily(t *testing.T) {
	v := vocab{specials: []string{"<unk>", "<|code_prefix|>", "<|code_suffix|>", "<|code_middle|>", "{{x"}}
	b := builderFor(t, v)
	if b.Family() != Generic || b.Order() != PSM || b.RepoLevel() {
		t.Fatalf("family %v order %v", b.Family(), b.Order())
	}
	got, _ := build(t, b, v, Request{Prefix: "a", Suffix: "b"}, 100)
	if got != "<|code_prefix|>a<|code_suffix|>b<|code_middle|>" {
		t.Fatalf("got %q", got)
	}
	f := noFIM
	f.Prefix, f.Suffix, f.Middle = 4, 2, 3
	b, err := NewBuilder(Config{FIM: f, TokenText: v.text, NumTokens: v.size()})
	if err != nil || b.Family() != Generic {
		t.Fatal(err)
	}
	if out := execTemplate(t, b.Template(), "P", "S"); out != "{{xP<|code_suffix|>S<|code_middle|>" {
		t.Fatalf("escaped template renders %q", out)
	}
}

func TestConfigValidation(t *testing.T) {
	ok := Config{FIM: llamaCppFIM(qwenVocab.size(), qwenVocab.text), TokenText: qwenVocab.text, NumTokens: qwenVocab.size()}
	bad := map[string]func(c *Config){
		"nil TokenText":   func(c *Config) { c.TokenText = nil },
		"negative size":   func(c *Config) { c.NumTokens = -1 },
		"BOS missing":     func(c *Config) { c.AddBOS, c.BOS = true, -1 },
		"BOS outside":     func(c *Config) { c.AddBOS, c.BOS = true, engine.Token(c.NumTokens) },
		"id outside":      func(c *Config) { c.FIM.Middle = engine.Token(c.NumTokens) },
		"id below -1":     func(c *Config) { c.FIM.Pad = -2 },
		"file sep beyond": func(c *Config) { c.FIM.FileSep = 1 << 30 },
	}
	for name, mutate := range bad {
		c := ok
		mutate(&c)
		b, err := NewBuilder(c)
		if err == nil || b != nil || errors.Is(err, ErrNoFIM) || !strings.HasPrefix(err.Error(), "fim: ") {
			t.Errorf("%s: builder %v err %v", name, b, err)
		}
	}
	if _, err := NewBuilder(ok); err != nil {
		t.Fatal(err)
	}
}

func TestTokenizerErrors(t *testing.T) {
	b := builderFor(t, qwenVocab)
	for _, r := range []Request{
		{Prefix: "bad"}, {Suffix: "bad"}, {Prompt: "bad"},
		{Extra: []File{{Text: "bad"}}}, {Extra: []File{{Name: "bad"}}}, {RepoName: "bad"}, {Filename: "bad"},
	} {
		if _, _, err := b.Build(failTok{"bad"}, r, 100); err == nil || !strings.HasPrefix(err.Error(), "fim: tokenize ") {
			t.Errorf("%+v: err %v", r, err)
		}
	}
	d := builderFor(t, deepseekVocab)
	if _, _, err := d.Build(failTok{"snippet"}, Request{Extra: []File{{Text: "x"}}}, 100); err == nil {
		t.Error("snippet separator error lost")
	}
	if _, _, err := b.Build(nil, Request{}, 100); err == nil {
		t.Error("nil tokenizer accepted")
	}
}

func execTemplate(t *testing.T, text, prompt, suffix string) string {
	t.Helper()
	tm, err := template.New("t").Parse(text)
	if err != nil {
		t.Fatalf("template %q: %v", text, err)
	}
	var sb strings.Builder
	if err := tm.Execute(&sb, struct{ Prompt, Suffix string }{prompt, suffix}); err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

// Ollama's /api/show template: Continue enables FIM when it mentions
// .Suffix; rendered, it spells the family's format.
func TestTemplates(t *testing.T) {
	for _, c := range []struct {
		v    vocab
		want string
	}{
		{qwenVocab, "<|fim_prefix|>P<|fim_suffix|>S<|fim_middle|>"},
		{starVocab, "<fim_prefix>P<fim_suffix>S<fim_middle>"},
		{llamaVocab, "<PRE> P <SUF>S <MID>"},
		{deepseekVocab, "<｜fim▁begin｜>P<｜fim▁hole｜>S<｜fim▁end｜>"},
		{mistralVocab, "[SUFFIX]S[PREFIX] P"},
	} {
		b := builderFor(t, c.v)
		if !strings.Contains(b.Template(), ".Suffix") {
			t.Errorf("%v: template %q lacks .Suffix", b.Family(), b.Template())
		}
		if got := execTemplate(t, b.Template(), "P", "S"); got != c.want {
			t.Errorf("%v: renders %q want %q", b.Family(), got, c.want)
		}
		if got := execTemplate(t, b.Template(), "P", ""); got != "P" {
			t.Errorf("%v: without suffix renders %q", b.Family(), got)
		}
	}
}

func TestNames(t *testing.T) {
	if Qwen.String() != "qwen" || Family(99).String() != "unknown" || SPM.String() != "spm" || PSM.String() != "psm" {
		t.Fatal("names")
	}
}

// One Builder serves every request of a model at once.
func TestConcurrentBuilds(t *testing.T) {
	b := builderFor(t, qwenVocab)
	r := Request{Prefix: "abc", Suffix: "def", Extra: twoFiles, Filename: "x"}
	want, _ := build(t, b, qwenVocab, r, 100)
	done := make(chan string)
	for range 8 {
		go func() {
			toks, _, _ := b.Build(byteTok{}, r, 100)
			done <- qwenVocab.render(toks)
		}()
	}
	for range 8 {
		if got := <-done; got != want {
			t.Errorf("concurrent build %q", got)
		}
	}
}

func TestFromDescriptor(t *testing.T) {
	v := llamaVocab
	d := &engine.Descriptor{Vocab: v.size(), BOS: v.bos, AddBOS: true, FIM: llamaCppFIM(v.size(), v.text)}
	b, err := FromDescriptor(d, v.text)
	if err != nil || b.Family() != CodeLlama {
		t.Fatalf("%v %v", b, err)
	}
	got, _ := build(t, b, v, Request{Prefix: "a", Suffix: "b"}, 10)
	if got != "<s>▁<PRE>a▁<SUF>b▁<MID>" {
		t.Fatalf("got %q", got)
	}
}
