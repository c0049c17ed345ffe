package pull

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "hand.gguf")
	os.WriteFile(model, tinyGGUF(t, 1, 1000), 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	elsewhere := filepath.Join(t.TempDir(), "other.gguf")
	os.WriteFile(elsewhere, []byte("any file at all"), 0o644)

	for arg, want := range map[string]string{
		"hand":      model,
		"hand.gguf": model,
		model:       model,
		elsewhere:   elsewhere, // a path is taken as it is, GGUF or not: the loader says what is wrong with it
	} {
		if got, err := Resolve(arg, dir); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", arg, got, err, want)
		}
	}
	for arg, want := range map[string]string{
		"missing":                    "superfluid pull",
		"notes.txt":                  "no such file",
		"/no/such/file.gguf":         "no such file",
		"hf.co/org/repo:Q4_K_M":      "`superfluid pull hf.co/org/repo:Q4_K_M` fetches it",
		"https://example.com/x.gguf": "has not been pulled",
		"":                           "no model",
	} {
		if got, err := Resolve(arg, dir); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Resolve(%q) = %q, %v; want an error saying %q", arg, got, err, want)
		}
	}
}

func TestListIgnoresPartialsAndMissingDir(t *testing.T) {
	if entries, err := List(filepath.Join(t.TempDir(), "none")); err != nil || len(entries) != 0 {
		t.Fatalf("a missing directory: %v, %v", entries, err)
	}
	dir := t.TempDir()
	for _, name := range []string{"b.gguf", "a.gguf", "a.mmproj.gguf", "c.gguf.partial", "c.gguf.partial.json", ".a.gguf.json.tmp1", "x.json"} {
		os.WriteFile(filepath.Join(dir, name), []byte("GGUF"), 0o644)
	}
	os.Mkdir(filepath.Join(dir, "d.gguf"), 0o755)
	entries, err := List(dir)
	if err != nil || len(entries) != 2 || entries[0].Name != "a" || entries[1].Name != "b" || entries[0].Source != "" || entries[0].Size != 4 {
		t.Fatalf("entries %+v, %v", entries, err)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 999: "999 B", 1000: "1.0 kB", 491_400_000: "491.4 MB", 999_960_000: "1.0 GB", 4_700_000_000: "4.7 GB"} {
		if got := FormatSize(n); got != want {
			t.Errorf("FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
