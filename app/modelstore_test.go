package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	sfhttp "superfluid/http"
)

// Delete's refusals and the unload hook, over a directory of files copied
// in by hand (pulling is covered end to end in e2e/ollama_pull_test.go).
func TestModelStoreDelete(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"served.gguf", "other.gguf", "stuck.gguf"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("GGUF"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var unloaded []string
	st := &modelStore{dir: dir, served: []string{filepath.Join(dir, "served.gguf")}, unload: func(name string) error {
		unloaded = append(unloaded, name)
		if name == "stuck" {
			return errors.New("it is answering a request")
		}
		return nil
	}}
	ctx := context.Background()
	for name, want := range map[string]error{
		"served": sfhttp.ErrModelInUse, "served.gguf": sfhttp.ErrModelInUse, "stuck": sfhttp.ErrModelInUse,
		"missing": sfhttp.ErrModelNotFound, "../served": sfhttp.ErrBadModelName, filepath.Join(dir, "other.gguf"): sfhttp.ErrBadModelName,
	} {
		if err := st.Delete(ctx, name); !errors.Is(err, want) {
			t.Errorf("Delete(%q) = %v, want %v", name, err, want)
		}
	}
	if err := st.Delete(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"served.gguf": true, "stuck.gguf": true, "other.gguf": false} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", name, err == nil, want)
		}
	}
	if len(unloaded) != 2 || unloaded[0] != "stuck" || unloaded[1] != "other" {
		t.Fatalf("unloaded %q; the served model is refused before any unload", unloaded)
	}
}

func TestModelStorePullRefusesANameBeforeReporting(t *testing.T) {
	st := &modelStore{dir: t.TempDir()}
	reported := false
	err := st.Pull(context.Background(), "llama3.2:1b", func(sfhttp.PullProgress) { reported = true })
	if !errors.Is(err, sfhttp.ErrBadModelName) || reported {
		t.Fatalf("an Ollama registry name: %v (reported %v)", err, reported)
	}
}
