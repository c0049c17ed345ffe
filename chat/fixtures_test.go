package chat

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"superfluid/gguf"
)

// modelsDir holds the shared GGUF vocabulary fixtures; it sits outside the
// repository, so tests that need it skip when it is absent.
const modelsDir = "../../shared/models"

// fixtures caches opened fixture files: each is decoded once per test
// binary, since a vocabulary takes tens of milliseconds. Tests using it do
// not run in parallel (gguf.File builds its key index lazily).
var fixtures sync.Map // path -> *gguf.File

func loadFixture(path string) (*gguf.File, error) {
	if f, ok := fixtures.Load(path); ok {
		return f.(*gguf.File), nil
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	fixtures.Store(path, f)
	return f, nil
}

func openFixture(t *testing.T, name string) *gguf.File {
	t.Helper()
	path := filepath.Join(modelsDir, name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("fixture %s not available: %v", path, err)
	}
	f, err := loadFixture(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	return f
}

// TestFixtureTemplates renders the templates the fixture files carry and
// compares with the prompt formats written out by hand.
func TestFixtureTemplates(t *testing.T) {
	qwen := chatMLConversation + "<|im_start|>assistant\n"
	qwenNoSystem := "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n" +
		"<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
	// Phi-3 drops system messages, so they are folded into the first user
	// message; its template opens the assistant turn after every user turn.
	phi3 := "<|user|>\nYou are a terse assistant.\nWhat is 2+2?<|end|>\n<|assistant|>\n" +
		"4.<|end|>\n<|user|>\nAnd 3+3?<|end|>\n<|assistant|>\n"
	tests := []struct {
		file, bos, want string
		system          bool
	}{
		{"ggml-vocab-qwen2.gguf", "<|endoftext|>", qwen, true},
		{"ggml-vocab-qwen2.5.gguf", "<|endoftext|>", qwen, true},
		{"ggml-vocab-phi-3.gguf", "<s>", "<s>" + phi3, false},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			src, opts, ok := FromGGUF(openFixture(t, tc.file))
			if !ok {
				t.Fatal("fixture carries no tokenizer.chat_template")
			}
			if opts.BOS != tc.bos {
				t.Errorf("BOS = %q, want %q", opts.BOS, tc.bos)
			}
			opts.TokenizerAddsBOS = false // compare the template's own output
			tmpl := mustParse(t, src, opts)
			if tmpl.SupportsSystemRole() != tc.system {
				t.Errorf("SupportsSystemRole = %v, want %v", tmpl.SupportsSystemRole(), tc.system)
			}
			checkRender(t, tmpl, conversation, true, tc.want)
			if strings.HasPrefix(tc.file, "ggml-vocab-qwen") {
				checkRender(t, tmpl, conversation[1:2], true, qwenNoSystem)
			}
		})
	}
}

// TestFixtureTokens pairs templates that the fixtures lack (their files
// carry no tokenizer.chat_template) with the fixtures' real BOS text.
func TestFixtureTokens(t *testing.T) {
	tests := []struct{ file, template, bos, wantPrefix string }{
		{"ggml-vocab-llama-bpe.gguf", "llama-3.jinja", "<|begin_of_text|>",
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a terse assistant.<|eot_id|>"},
		{"ggml-vocab-deepseek-coder.gguf", "deepseek-coder.jinja", "<｜begin▁of▁sentence｜>",
			"<｜begin▁of▁sentence｜>You are a terse assistant.### Instruction:\n"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			src, opts, ok := FromGGUF(openFixture(t, tc.file))
			if ok {
				t.Logf("fixture now carries a template of %d bytes; this test still uses testdata/%s", len(src), tc.template)
			}
			if opts.BOS != tc.bos {
				t.Fatalf("BOS = %q, want %q", opts.BOS, tc.bos)
			}
			opts.TokenizerAddsBOS = false
			out, err := mustParse(t, testdataTemplate(t, tc.template), opts).Render(conversation, true)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(out, tc.wantPrefix) {
				t.Errorf("got %q, want prefix %q", out, tc.wantPrefix)
			}
		})
	}
}

// TestAllFixtures renders every fixture that carries a template, including
// any added later, and checks that each message's text comes out.
func TestAllFixtures(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(modelsDir, "*.gguf"))
	if len(paths) == 0 {
		t.Skipf("no fixtures in %s", modelsDir)
	}
	rendered := 0
	for _, path := range paths {
		f, err := loadFixture(path)
		if err != nil {
			t.Errorf("open %s: %v", path, err)
			continue
		}
		src, opts, ok := FromGGUF(f)
		if !ok {
			t.Logf("%s: no tokenizer.chat_template", filepath.Base(path))
			continue
		}
		tmpl, err := Parse(src, opts)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(path), err)
			continue
		}
		out, err := tmpl.Render(conversation, true)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(path), err)
			continue
		}
		for _, m := range conversation {
			if !strings.Contains(out, m.Content) {
				t.Errorf("%s: %q missing from %q", filepath.Base(path), m.Content, out)
			}
		}
		rendered++
	}
	if rendered == 0 {
		t.Error("no fixture carries a chat template")
	}
}

// TestFromGGUFTokenizerAddsBOS checks that add_bos_token reaches Options
// and strips the BOS Phi-3's template writes.
func TestFromGGUFTokenizerAddsBOS(t *testing.T) {
	f := openFixture(t, "ggml-vocab-phi-3.gguf")
	src, opts, _ := FromGGUF(f)
	want, stored := f.Bool("tokenizer.ggml.add_bos_token")
	if !stored || opts.TokenizerAddsBOS != want {
		t.Fatalf("TokenizerAddsBOS = %v, file says %v (stored %v)", opts.TokenizerAddsBOS, want, stored)
	}
	opts.TokenizerAddsBOS = true
	out, err := mustParse(t, src, opts).Render(conversation[1:2], true)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n"; out != want {
		t.Errorf("got %q, want %q", out, want)
	}
}
