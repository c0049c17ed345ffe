package app

import (
	"os"
	"path/filepath"
	"testing"
)

// A projector is found beside its model by name; --mmproj wins; a model
// without one has none.
func TestMMProjFor(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "cat.gguf")
	beside := filepath.Join(dir, "cat.mmproj.gguf")
	if got := mmprojFor(ModelSpec{Path: model}); got != "" {
		t.Errorf("no projector beside: %q", got)
	}
	if err := os.WriteFile(beside, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := mmprojFor(ModelSpec{Path: model}); got != beside {
		t.Errorf("beside: %q, want %q", got, beside)
	}
	if got := mmprojFor(ModelSpec{Path: model, MMProj: "/x/other.gguf"}); got != "/x/other.gguf" {
		t.Errorf("--mmproj: %q", got)
	}
	os.Mkdir(filepath.Join(dir, "dog.mmproj.gguf"), 0o755)
	if got := mmprojFor(ModelSpec{Path: filepath.Join(dir, "dog.gguf")}); got != "" {
		t.Errorf("a directory named like a projector: %q", got)
	}
}
