package command

import (
	"testing"

	"superfluid/app"
)

func TestParseLoRA(t *testing.T) {
	for _, c := range []struct {
		in     string
		scaled bool
		want   app.LoRAFile
	}{
		{"a.gguf", false, app.LoRAFile{Path: "a.gguf", Scale: 1}},
		{"a.gguf:0.5", false, app.LoRAFile{Path: "a.gguf", Scale: 0.5}},
		{"a.gguf:0", false, app.LoRAFile{Path: "a.gguf", Scale: 0}},
		{"dir:x/a.gguf", false, app.LoRAFile{Path: "dir:x/a.gguf", Scale: 1}},
		{"a.gguf:-2", true, app.LoRAFile{Path: "a.gguf", Scale: -2}},
	} {
		got, err := parseLoRA(c.in, c.scaled)
		if err != nil || got != c.want {
			t.Errorf("%q: %+v %v, want %+v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []struct {
		in     string
		scaled bool
	}{{"a.gguf", true}, {":1", false}, {"a.gguf:1e9", false}, {"a.gguf:NaN", false}} {
		if got, err := parseLoRA(bad.in, bad.scaled); err == nil {
			t.Errorf("%q accepted: %+v", bad.in, got)
		}
	}
}
