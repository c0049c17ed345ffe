package command

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"superfluid/synth"
)

var testModel string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "superfluid-main-test")
	if err != nil {
		panic(err)
	}
	testModel = filepath.Join(dir, "tiny.gguf")
	shape, _ := synth.ShapeByName("tiny")
	if err := synth.Write(testModel, synth.Options{Shape: shape, Type: "f16", Seed: 3}); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runCLI runs the command line in-process and returns stdout, stderr and the error.
func runCLI(args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	err := runApp(newApp(&out, &errOut), append([]string{"superfluid", "--log-level", "warn"}, args...))
	return out.String(), errOut.String(), err
}

func TestRunStreamsTextAndTimings(t *testing.T) {
	out, errOut, err := runCLI("run", "--model", testModel, "--prompt", "Hello there", "--max-tokens", "24", "--threads", "1")
	if err != nil {
		t.Fatalf("run: %v (%s)", err, errOut)
	}
	if !utf8.ValidString(out) || len(strings.TrimSpace(out)) == 0 {
		t.Fatalf("output %q", out)
	}
	if !strings.Contains(errOut, "prompt:") || !strings.Contains(errOut, "generation: 24 tokens") || !strings.Contains(errOut, "tok/s") {
		t.Fatalf("timings %q", errOut)
	}
	again, _, err := runCLI("run", "--model", testModel, "--prompt", "Hello there", "--max-tokens", "24", "--threads", "1")
	if err != nil || again != out {
		t.Fatalf("greedy run not repeatable: %q vs %q (%v)", out, again, err)
	}
	if _, _, err := runCLI("run", "--model", testModel, "--prompt", "Hello there", "--chat", "--max-tokens", "4", "--threads", "1"); err != nil {
		t.Fatalf("chat run: %v", err)
	}
}

func TestBadInvocationsFailWithOneLine(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.gguf")
	os.WriteFile(junk, []byte("definitely not GGUF"), 0o644)
	long := strings.Repeat("word ", 700)
	cases := map[string][]string{
		"unknown flag":          {"run", "--model", testModel, "--prompt", "x", "--bogus"},
		"missing model":         {"run", "--model", filepath.Join(dir, "nope.gguf"), "--prompt", "x"},
		"not GGUF":              {"run", "--model", junk, "--prompt", "x"},
		"prompt past context":   {"run", "--model", testModel, "--prompt", long, "--ctx", "256"},
		"info of a non-GGUF":    {"model", "info", "--model", junk},
		"unknown synth shape":   {"model", "synth", "--shape", "huge", "-o", filepath.Join(dir, "x.gguf")},
		"missing required flag": {"run", "--model", testModel},
		"unknown spec type":     {"serve", "--model", testModel, "--port", "0", "--spec-type", "draft-eagle3"},
		"draft max of 0":        {"serve", "--model", testModel, "--port", "0", "--spec-type", "ngram-simple", "--spec-draft-n-max", "0"},
		"draft min past max":    {"serve", "--model", testModel, "--port", "0", "--spec-type", "ngram-simple", "--spec-draft-n-min", "5"},
		"synth len and rates":   {"serve", "--model", testModel, "--port", "0", "--spec-type", "ngram-simple", "--spec-synth-len", "2", "--spec-synth-rates", "0.5,0.4,0.3,0.2"},
		"synth rates rising":    {"serve", "--model", testModel, "--port", "0", "--spec-type", "ngram-simple", "--spec-synth-rates", "0.1,0.4,0.3,0.2"},
		"synth rates not four":  {"serve", "--model", testModel, "--port", "0", "--spec-type", "ngram-simple", "--spec-synth-rates", "0.5"},
		"synth without a type":  {"serve", "--model", testModel, "--port", "0", "--spec-synth-len", "2"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := runCLI(args...)
			if err == nil {
				t.Fatal("no error")
			}
			if msg := oneLine(err); strings.Contains(msg, "\n") || msg == "" {
				t.Fatalf("error %q", msg)
			}
		})
	}
}

func TestModelInfoPrintsDescriptor(t *testing.T) {
	out, _, err := runCLI("model", "info", "--model", testModel)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Architecture string `json:"architecture"`
		Vocab        int    `json:"vocab_size"`
		FIM          struct {
			Prefix int `json:"prefix"`
		} `json:"fim"`
		Identity string `json:"identity"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if d.Architecture != "llama" || d.Vocab == 0 || d.FIM.Prefix < 0 || len(d.Identity) != 64 {
		t.Fatalf("descriptor %+v", d)
	}
}

func TestModelSynthWritesLoadableModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if _, _, err := runCLI("model", "synth", "--shape", "tiny", "--type", "q8_0", "--seed", "9", "-o", path); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runCLI("run", "--model", path, "--prompt", "abc", "--max-tokens", "3", "--threads", "1"); err != nil {
		t.Fatal(err)
	}
}
