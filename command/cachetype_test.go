package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/synth"
)

// A KV cache type the engine does not know is refused by its flag's name
// before a model loads, on every command that takes one and from the
// environment as well; so is a quantized V cache with flash attention off.
func TestBadCacheTypesRefusedByName(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	os.WriteFile(in, []byte(`{"prompt":"x"}`+"\n"), 0o644)
	cases := []struct {
		name string
		env  string // SUPERFLUID_CACHE_TYPE_V, when set
		args []string
		want string
		// oldEnv is SUPERFLUID_KV_TYPE, the variable before K and V were apart.
		oldEnv string
	}{
		{"run", "", []string{"run", "--model", testModel, "--prompt", "x", "--cache-type-k", "q2"}, `--cache-type-k "q2"`, ""},
		{"run, short", "", []string{"run", "--model", testModel, "--prompt", "x", "-ctv", "Q8_0"}, `--cache-type-v "Q8_0"`, ""},
		{"serve", "", []string{"serve", "--model", testModel, "--port", "0", "--cache-type-v", "q8"}, `--cache-type-v "q8"`, ""},
		{"serve, flash attention off", "", []string{"serve", "--model", testModel, "--port", "0", "-ctv", "q8_0", "--flash-attn", "off"}, "--cache-type-v q8_0 needs flash attention", ""},
		{"batch", "", []string{"batch", "--model", testModel, "-o", filepath.Join(dir, "out.jsonl"), "-ctk", "int8", in}, `--cache-type-k "int8"`, ""},
		{"model info", "", []string{"model", "info", "--model", testModel, "-ctk", ""}, `--cache-type-k ""`, ""},
		{"environment", "f12", []string{"run", "--model", testModel, "--prompt", "x"}, `--cache-type-v "f12"`, ""},
		{"the old variable", "", []string{"serve", "--model", testModel, "--port", "0"}, `SUPERFLUID_KV_TYPE="q8_0" is no longer read`, "q8_0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("SUPERFLUID_CACHE_TYPE_V", c.env)
			}
			if c.oldEnv != "" {
				t.Setenv("SUPERFLUID_KV_TYPE", c.oldEnv)
			}
			_, _, err := runCLI(c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("%v, want an error naming %s", err, c.want)
			}
		})
	}
}

// model info reports the KV bytes one context token takes at the cache
// types given: q8_0 cells take 34/64 of f16's (a 32-value block is 32
// bytes and an f16 scale), q4_0 18/64, and K and V count apart.
func TestModelInfoReportsKVBytesPerCacheType(t *testing.T) {
	path := filepath.Join(t.TempDir(), "small.gguf")
	shape, _ := synth.ShapeByName("small")
	if err := synth.Write(path, synth.Options{Shape: shape, Type: "q4_0", Seed: 3}); err != nil {
		t.Fatal(err)
	}
	info := func(args ...string) (typeK, typeV string, perToken int64) {
		t.Helper()
		out, errOut, err := runCLI(append([]string{"model", "info", "--model", path}, args...)...)
		if err != nil {
			t.Fatalf("model info %v: %v (%s)", args, err, errOut)
		}
		var d struct {
			TypeK    string `json:"cache_type_k"`
			TypeV    string `json:"cache_type_v"`
			PerToken int64  `json:"kv_bytes_per_token"`
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("%v in %q", err, out)
		}
		return d.TypeK, d.TypeV, d.PerToken
	}
	k, v, f16 := info()
	if k != "f16" || v != "f16" || f16 != int64(shape.Layers*2*shape.KVDim()*2) {
		t.Fatalf("default: K %s, V %s, %d bytes per token", k, v, f16)
	}
	for _, c := range []struct {
		args     []string
		k, v     string
		num, den int64 // of f16's bytes
	}{
		{[]string{"--cache-type-k", "q8_0", "--cache-type-v", "q8_0"}, "q8_0", "q8_0", 34, 64},
		{[]string{"-ctk", "q4_0", "-ctv", "q4_0"}, "q4_0", "q4_0", 18, 64},
		{[]string{"-ctk", "q8_0"}, "q8_0", "f16", 34 + 64, 128},
	} {
		k, v, n := info(c.args...)
		if k != c.k || v != c.v || n*c.den != f16*c.num {
			t.Errorf("%v: K %s, V %s, %d bytes per token; f16's %d", c.args, k, v, n, f16)
		}
		t.Logf("K %s, V %s: %d KV bytes per token (f16 %d)", k, v, n, f16)
	}
}
