package command

import (
	"io"
	"slices"
	"testing"
)

func TestFlagsFirst(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	for _, tc := range []struct{ in, want []string }{
		{[]string{"sf", "batch", "--model", "m.gguf", "in.jsonl", "-o", "out.jsonl"}, []string{"sf", "batch", "--model", "m.gguf", "-o", "out.jsonl", "in.jsonl"}},
		{[]string{"sf", "--log-level", "warn", "batch", "-", "--output=o", "--url", "http://x"}, []string{"sf", "--log-level", "warn", "batch", "--output=o", "--url", "http://x", "-"}},
		{[]string{"sf", "pull", "hf.co/a/b:c.gguf", "--name", "n"}, []string{"sf", "pull", "--name", "n", "hf.co/a/b:c.gguf"}},
		{[]string{"sf", "batch", "in", "--", "-o"}, []string{"sf", "batch", "in", "--", "-o"}},
		// --no-repack (-nr) is a boolean engine flag: it takes no value.
		{[]string{"sf", "batch", "in.jsonl", "--no-repack", "-o", "out"}, []string{"sf", "batch", "--no-repack", "-o", "out", "in.jsonl"}},
		{[]string{"sf", "batch", "in.jsonl", "-nr", "-o", "out"}, []string{"sf", "batch", "-nr", "-o", "out", "in.jsonl"}},
		{[]string{"sf", "model", "info", "x", "--model", "m"}, []string{"sf", "model", "info", "--model", "m", "x"}},
		{[]string{"sf", "nonsense", "a", "-b"}, []string{"sf", "nonsense", "a", "-b"}},
		{[]string{"sf"}, []string{"sf"}},
		{[]string{"sf", "pull", "--name", "n", "url", "--sha256"}, []string{"sf", "pull", "--name", "n", "url", "--sha256"}},
	} {
		if got := flagsFirst(app, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("flagsFirst(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
