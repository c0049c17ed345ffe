package cgo

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"superfluid/synth"
)

// The tests' models are generated once per test binary into a temporary
// folder: the synthetic tiny model by default; grafted vocabularies from
// ../shared/models where that folder exists.
var (
	modelDir  string
	modelMu   sync.Mutex
	modelMemo = map[string]string{}
)

const sharedModels = "../../shared/models"

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "superfluid-cgo-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	modelDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// synthModel writes (once) a tiny synthetic model, with the vocabulary of
// vocabFile when it is not empty.
func synthModel(t testing.TB, vocabFile string) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	if p, ok := modelMemo[vocabFile]; ok {
		return p
	}
	shape, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, fmt.Sprintf("tiny-%d.gguf", len(modelMemo)))
	if err := synth.Write(path, synth.Options{Shape: shape, VocabFile: vocabFile, Type: "f16", Seed: 7}); err != nil {
		t.Fatal(err)
	}
	modelMemo[vocabFile] = path
	return path
}

// tinyModel returns the tiny synthetic model with the built-in vocabulary.
func tinyModel(t testing.TB) string { return synthModel(t, "") }

// sharedModel returns a file from ../shared/models, or skips the test.
func sharedModel(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(sharedModels, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared fixture %s not present (%v): real-tokenizer coverage skipped", name, err)
	}
	return p
}
