package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// `superfluid run` is one /completion request on the same core: for the
// same model, prompt, n_predict and sampling fields, the real binary's
// stdout is byte for byte the content a real server answers, and it
// generates as many tokens. Both sides run one lane of the same engine
// shape (--lanes 1, --ctx, --batch, one thread), a request alone in it, so
// no batching differs and byte equality (not the near-tie oracle) holds —
// for greedy text, for sampled text (the same seed through the same
// default truncation samplers: top_k, top_p and min_p as /completion
// leaves them), for a stop string, and for --chat against
// /apply-template's rendering of the same user message.
func TestRunAnswersAsCompletion(t *testing.T) {
	model := tinyModel(t)
	shape := []string{"--ctx", "2048", "--batch", "512", "--threads", "1"}
	srv := startServe(t, nil, append([]string{"--model", model, "--alias", "tiny", "--port", "0", "--lanes", "1", "--park-dir", "off"}, shape...)...)
	const prompt, n = "Once upon a time, in a land far away,", 40
	greedy := runCLIText(t, append([]string{"--model", model, "--prompt", prompt, "-n", strconv.Itoa(n)}, shape...)...)
	if len(strings.TrimSpace(greedy.text)) == 0 {
		t.Fatalf("run generated nothing: %+v", greedy)
	}
	// A stop string from the middle of the greedy text: both sides end
	// before it. (On the tiny model it is "so\n", whose newline the
	// command line must keep: "so" alone would stop earlier.)
	runes := []rune(greedy.text)
	stop := string(runes[len(runes)/2 : len(runes)/2+3])
	chat := completionOf(t, srv.url, "/apply-template", map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}}})

	cases := []struct {
		name string
		args []string
		body map[string]any
	}{
		{"greedy", nil, map[string]any{"temperature": 0}},
		{"sampled", []string{"--temperature", "0.9", "--seed", "7"}, map[string]any{"temperature": 0.9, "seed": 7}},
		{"stop", []string{"--stop", stop}, map[string]any{"temperature": 0, "stop": []string{stop}}},
		{"chat", []string{"--chat"}, map[string]any{"temperature": 0, "prompt": chat.Prompt}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := runCLIText(t, append(append([]string{"--model", model, "--prompt", prompt, "-n", strconv.Itoa(n)}, shape...), c.args...)...)
			body := map[string]any{"prompt": prompt, "n_predict": n}
			for k, v := range c.body {
				body[k] = v
			}
			want := completionOf(t, srv.url, "/completion", body)
			if got.text != want.Content {
				t.Errorf("run %v printed\n%q\n/completion answered\n%q", c.args, got.text, want.Content)
			}
			if got.generated != want.TokensPredicted {
				t.Errorf("run generated %d tokens, /completion %d", got.generated, want.TokensPredicted)
			}
			if c.name == "stop" && (strings.Contains(got.text, stop) || len(got.text) >= len(greedy.text)) {
				t.Errorf("run did not stop at %q: %q", stop, got.text)
			}
		})
	}
}

// runOutput is what `superfluid run` printed: its text (stdout without the
// closing newline) and the generated count of its summary line.
type runOutput struct {
	text      string
	generated int
}

var runSummary = regexp.MustCompile(`generation: (\d+) tokens`)

func runCLIText(t *testing.T, args ...string) runOutput {
	t.Helper()
	cmd := exec.Command(superfluidBinary(t), append([]string{"--log-level", "warn", "run"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("run %v: %v\n%s", args, err, stderr.String())
	}
	m := runSummary.FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no summary line in %q", stderr.String())
	}
	n, _ := strconv.Atoi(m[1])
	return runOutput{text: strings.TrimSuffix(stdout.String(), "\n"), generated: n}
}

// completionAnswer is the part of a /completion or /apply-template answer
// the comparison reads.
type completionAnswer struct {
	Content         string `json:"content"`
	TokensPredicted int    `json:"tokens_predicted"`
	Prompt          string `json:"prompt"`
}

func completionOf(t *testing.T, url, path string, body map[string]any) completionAnswer {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out completionAnswer
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d, %v", path, resp.StatusCode, err)
	}
	return out
}
