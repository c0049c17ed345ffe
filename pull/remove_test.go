package pull

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"superfluid/flock"
)

// A pull reports its stages in order, each with the digest it expects.
func TestPullReportsItsStages(t *testing.T) {
	data := tinyGGUF(t, 21, 100<<10)
	newHFServer(t, "org/repo", map[string][]byte{"m-Q8_0.gguf": data})
	opts := quick(t.TempDir())
	var stages []Stage
	opts.OnProgress = func(p Progress) {
		if p.SHA256 != digest(data) {
			t.Errorf("a report of stage %d without the announced digest: %q", p.Stage, p.SHA256)
		}
		if n := len(stages); n == 0 || stages[n-1] != p.Stage {
			stages = append(stages, p.Stage)
		}
	}
	if _, err := Pull(context.Background(), "hf.co/org/repo:Q8_0", opts); err != nil {
		t.Fatal(err)
	}
	if want := []Stage{Downloading, Verifying, Saving}; !slices.Equal(stages, want) {
		t.Fatalf("stages %v, want %v", stages, want)
	}
}

func TestFindAndRemove(t *testing.T) {
	data := tinyGGUF(t, 22, 50<<10)
	fs := newFileServer(t, data)
	dir := t.TempDir()
	url := fs.URL + "/files/pulled.gguf"
	if _, err := Pull(context.Background(), url, quick(dir)); err != nil {
		t.Fatal(err)
	}
	hand := filepath.Join(dir, "hand.gguf")
	os.WriteFile(hand, data, 0o644)
	os.WriteFile(filepath.Join(dir, "half.gguf.partial"), data[:100], 0o644)
	os.WriteFile(filepath.Join(dir, "half.gguf.partial.json"), []byte("{}"), 0o644)
	outside := filepath.Join(t.TempDir(), "outside.gguf")
	os.WriteFile(outside, data, 0o644)

	for name, want := range map[string]string{
		"pulled": filepath.Join(dir, "pulled.gguf"), "pulled.gguf": filepath.Join(dir, "pulled.gguf"),
		url: filepath.Join(dir, "pulled.gguf"), "hand": hand, "half": filepath.Join(dir, "half.gguf"),
	} {
		if got, err := Find(dir, name); err != nil || got != want {
			t.Errorf("Find(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	for name, want := range map[string]error{
		"missing": ErrNotFound, "https://example.com/other.gguf": ErrNotFound, "hf.co/a/b:Q4_0": ErrNotFound,
		"../outside": ErrBadName, outside: ErrBadName, "sub/x": ErrBadName, `..\x`: ErrBadName, ".hidden": ErrBadName,
		"..": ErrBadName, "": ErrBadName, "a\x00b": ErrBadName, "hf.co/a/b\x00": ErrBadName, "hf.co/nope": ErrBadName,
		strings.Repeat("a", 300): ErrBadName,
	} {
		if got, err := Find(dir, name); !errors.Is(err, want) {
			t.Errorf("Find(%q) = %q, %v; want an error wrapping %v", name, got, err, want)
		}
	}

	for _, name := range []string{"pulled", "half"} {
		p, _ := Find(dir, name)
		if err := Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if got := onlyFiles(t, dir); !slices.Equal(got, []string{"hand.gguf"}) {
		t.Fatalf("left after removing: %q", got)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Fatal("a file outside the directory was touched")
	}
}

// A model being pulled (its partial file locked) is not removed.
func TestRemoveRefusesAModelBeingPulled(t *testing.T) {
	dir := t.TempDir()
	partial := filepath.Join(dir, "busy.gguf.partial")
	os.WriteFile(partial, []byte("GGUF"), 0o644)
	f, err := os.OpenFile(partial, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := flock.Try(f); err != nil {
		t.Skipf("no flock here: %v", err)
	}
	if err := Remove(filepath.Join(dir, "busy.gguf")); !errors.Is(err, ErrPulling) {
		t.Fatalf("Remove of a model being pulled: %v", err)
	}
	if !exists(partial) {
		t.Fatal("the running pull's file was removed")
	}
}
