package ollama

import "testing"

func TestOllamaStoreName(t *testing.T) {
	for in, want := range map[string]string{
		"tiny:latest": "tiny", "tiny": "tiny", "hf.co/a/b:latest": "hf.co/a/b", "hf.co/a/b:Q4_K_M": "hf.co/a/b:Q4_K_M",
		"https://h/x.gguf:latest": "https://h/x.gguf:latest",
	} {
		if got := storeName(in); got != want {
			t.Errorf("storeName(%q) = %q, want %q", in, got, want)
		}
	}
}
