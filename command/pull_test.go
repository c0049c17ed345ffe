package command

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"superfluid/pull"
)

func TestPullThenModelsAndResolveModelFlag(t *testing.T) {
	data, err := os.ReadFile(testModel)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"tiny"`)
		http.ServeContent(w, r, "tiny.gguf", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	dir := t.TempDir()
	url := srv.URL + "/files/tiny-chat.gguf"
	sum := sha256.Sum256(data)

	if _, errOut, _ := runCLI("models", "--models-dir", dir); !strings.Contains(errOut, "no models in "+dir) {
		t.Fatalf("models of an empty directory: %q", errOut)
	}
	_, errOut, err := runCLI("pull", "--models-dir", dir, url)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(errOut, "pulled tiny-chat (") || !strings.Contains(errOut, "sha256:"+hex.EncodeToString(sum[:])) || strings.Count(errOut, "\n") != 1 || strings.Contains(errOut, "\r") {
		t.Fatalf("pull printed %q, want one final line", errOut)
	}
	if _, errOut, err := runCLI("pull", "--models-dir", dir, url); err != nil || !strings.HasPrefix(errOut, "tiny-chat is up to date") {
		t.Fatalf("pulling again: %q, %v", errOut, err)
	}

	out, _, err := runCLI("models", "--models-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME SIZE SOURCE MODIFIED" ||
		!strings.HasPrefix(lines[1], "tiny-chat ") || !strings.Contains(lines[1], url) {
		t.Fatalf("models printed %q", out)
	}
	out, _, err = runCLI("models", "--models-dir", dir, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var entries []pull.Entry
	if err := json.Unmarshal([]byte(out), &entries); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if len(entries) != 1 || entries[0].Name != "tiny-chat" || entries[0].Path != filepath.Join(dir, "tiny-chat.gguf") || entries[0].Size != int64(len(data)) || entries[0].Source != url {
		t.Fatalf("models --json: %+v", entries)
	}

	// --model takes the pulled name, or the reference it was pulled from.
	for _, model := range []string{"tiny-chat", url} {
		if out, errOut, err := runCLI("model", "info", "--models-dir", dir, "--model", model); err != nil || !strings.Contains(out, `"architecture": "llama"`) {
			t.Fatalf("model info --model %s: %v (%s)", model, err, errOut)
		}
	}
	_, _, err = runCLI("run", "--models-dir", dir, "--model", "tiny-chot", "--prompt", "x")
	if err == nil || !strings.Contains(err.Error(), "superfluid pull") || strings.Contains(oneLine(err), "\n") {
		t.Fatalf("an unknown model name: %v", err)
	}

	for args, want := range map[string]string{
		"pull":                      "missing REF",
		"pull " + url + " --sha256": "flag --sha256 needs a value",
		"pull a b":                  "unexpected argument",
		"pull qwen":                 "want hf.co/ORG/REPO:FILE",
		"models extra":              "unexpected argument",
	} {
		argv := strings.Fields(args)
		argv = append([]string{argv[0], "--models-dir", dir}, argv[1:]...)
		if _, _, err := runCLI(argv...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
}
