package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"superfluid/app"
	"superfluid/synth"
)

var (
	modelDir  string
	modelMu   sync.Mutex
	modelMemo = map[string]string{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "superfluid-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	modelDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// model writes (once per test binary) a synthetic model of shape with the
// built-in vocabulary, or vocabFile's when it is not "".
func model(t testing.TB, shape, vocabFile string) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := shape + "|" + vocabFile
	if p, ok := modelMemo[key]; ok {
		return p
	}
	s, err := synth.ShapeByName(shape)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, fmt.Sprintf("%s-%d.gguf", shape, len(modelMemo)))
	if err := synth.Write(path, synth.Options{Shape: s, VocabFile: vocabFile, Type: "f16", Seed: 11}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

// tinyModel is the default fixture: the tiny synthetic model with the
// built-in byte-level vocabulary (ChatML and FIM tokens).
func tinyModel(t testing.TB) string { return model(t, "tiny", "") }

// sharedVocab returns a vocabulary file from ../shared/models, or skips.
func sharedVocab(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join("..", "..", "shared", "models", name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared fixture %s not present (%v): real-tokenizer coverage skipped", name, err)
	}
	return p
}

// startStack starts the real server on a loopback port. One thread keeps
// test packages from fighting over the two cores; greedy outputs do not
// depend on the thread count.
func startStack(t testing.TB, o app.Options) *app.Stack {
	t.Helper()
	if o.ModelPath == "" {
		o.ModelPath = tinyModel(t)
	}
	if o.Threads == 0 {
		o.Threads = 1
	}
	if o.Ctx == 0 {
		o.Ctx = 4096
	}
	if o.Alias == "" {
		o.Alias = "tiny"
	}
	st, err := app.Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return st
}
