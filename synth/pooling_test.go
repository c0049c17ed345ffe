package synth

import (
	"path/filepath"
	"testing"

	"superfluid/gguf"
)

// An embedding model carries <arch>.pooling_type with llama.cpp's enum
// value; a generation model carries no such key; an unknown name is refused.
func TestPoolingKey(t *testing.T) {
	dir := t.TempDir()
	for name, want := range map[string]uint32{"mean": 1, "cls": 2, "last": 3, "none": 0, "": 0} {
		path := filepath.Join(dir, "m-"+name+".gguf")
		if err := Write(path, Options{Shape: tiny(t), Seed: 1, Pooling: name}); err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := f.Uint32("llama.pooling_type")
		if want == 0 && ok {
			t.Errorf("%q: pooling_type %d written for a generation model", name, got)
		}
		if want != 0 && (!ok || got != want) {
			t.Errorf("%q: pooling_type = %d, %v; want %d", name, got, ok, want)
		}
	}
	if err := Write(filepath.Join(dir, "bad.gguf"), Options{Shape: tiny(t), Pooling: "max"}); err == nil {
		t.Error("pooling max accepted")
	}
}
