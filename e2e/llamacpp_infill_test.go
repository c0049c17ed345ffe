package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"superfluid/app"
)

// /infill over a real socket, driven with the bodies the editors send:
// llama.vim (autoload/llama.vim, llama#fim and s:ring_update) and
// llama.vscode (src/llama-server.ts, createRequestPayload), verbatim but
// for the editor's state (buffer text, chunk times, file names) filled in.

// llamaVimChunks is llama.vim's input_extra: ring-buffer chunks with the
// reltime() they were picked at.
const llamaVimChunks = `[{"text": "import os\nimport sys\n\ndef read_config(path):\n    with open(path) as f:\n        return f.read()\n", "time": [1732901234, 567890], "filename": "config.py"}, {"text": "class Server:\n    def __init__(self, port):\n        self.port = port\n", "time": [1732901240, 12345], "filename": "server.py"}]`

// llamaVimRingUpdate is s:ring_update's request: the extra context alone,
// evaluated into the cache ahead of the next completion.
const llamaVimRingUpdate = `{"input_prefix": "", "input_suffix": "", "input_extra": ` + llamaVimChunks + `, "prompt": "", "n_predict": 0, "temperature": 0.0, "stream": false, "samplers": [], "cache_prompt": true, "t_max_prompt_ms": 1, "t_max_predict_ms": 1, "response_fields": [""]}`

// llamaVimFIM is llama#fim's request for a cursor after "    retu" in
// main() (the first request of a position: t_max_predict_ms 250).
const llamaVimFIM = `{"input_prefix": "import os\n\ndef main():\n    cfg = read_config(\"app.toml\")\n", "input_suffix": "\n\nif __name__ == \"__main__\":\n    main()\n", "input_extra": ` + llamaVimChunks + `, "prompt": "    retu", "n_predict": 128, "stop": [], "n_indent": 4, "top_k": 40, "top_p": 0.9, "stream": false, "samplers": ["top_k", "top_p", "infill"], "cache_prompt": true, "t_max_prompt_ms": 500, "t_max_predict_ms": 250, "response_fields": ["content", "timings/prompt_n", "timings/prompt_ms", "timings/prompt_per_token_ms", "timings/prompt_per_second", "timings/predicted_n", "timings/predicted_ms", "timings/predicted_per_token_ms", "timings/predicted_per_second", "truncated", "tokens_cached"]}`

// llamaVscodeChunks is llama.vscode's input_extra: {text, time: Date.now(),
// filename}.
const llamaVscodeChunks = `[{"text":"export function add(a: number, b: number): number {\n    return a + b;\n}\n","time":1732901234567,"filename":"/home/dev/proj/src/math.ts"}]`

// llamaVscodeWarmup is updateExtraContext's request (noPredict).
const llamaVscodeWarmup = `{"input_prefix":"","input_suffix":"","input_extra":` + llamaVscodeChunks + `,"prompt":"","n_predict":0,"samplers":[],"cache_prompt":true,"t_max_prompt_ms":500,"t_max_predict_ms":1}`

// llamaVscodeFIM is getFIMCompletion's request.
const llamaVscodeFIM = `{"input_prefix":"import { add } from './math';\n\nfunction total(xs: number[]): number {\n","input_suffix":"\n}\n","input_extra":` + llamaVscodeChunks + `,"prompt":"    let sum = 0;","n_predict":128,"top_k":40,"top_p":0.99,"stream":false,"samplers":["top_k","top_p","infill"],"cache_prompt":true,"n_indent":4,"t_max_prompt_ms":500,"t_max_predict_ms":2500}`

// llama.vim: the ring update answers {} (response_fields [""]) and warms
// the cache, so the completion that follows finds its extra context there;
// the completion answers exactly the fields llama.vim names.
func TestInfillLlamaVim(t *testing.T) {
	st := startStack(t, app.Options{})
	status, body := llamaPost(t, st.URL()+"/infill", llamaVimRingUpdate)
	if status != 200 || strings.TrimSpace(string(body)) != "{}" {
		t.Fatalf("ring update: %d %s", status, body)
	}
	got := llamaDo[map[string]json.RawMessage](t, st, "/infill", llamaVimFIM)
	var req struct {
		Fields []string `json:"response_fields"`
	}
	json.Unmarshal([]byte(llamaVimFIM), &req)
	if keys := mapKeysSorted(got); len(keys) != len(req.Fields) {
		t.Fatalf("keys %v, want %v", keys, req.Fields)
	}
	var cached int
	json.Unmarshal(got["tokens_cached"], &cached)
	if cached == 0 || string(got["truncated"]) != "false" {
		t.Fatalf("after the ring update: tokens_cached %d, truncated %s", cached, got["truncated"])
	}
}

// llama.vscode: the warm-up returns at once with nothing generated; the
// completion is warm and carries what LlamaResponse reads.
func TestInfillLlamaVscode(t *testing.T) {
	st := startStack(t, app.Options{})
	warm := llamaDo[llamaCompletion](t, st, "/infill", llamaVscodeWarmup)
	if warm.Content != "" || warm.TokensPredicted != 0 || warm.TokensCached != 0 {
		t.Fatalf("warm-up %+v", warm)
	}
	c := llamaDo[llamaCompletion](t, st, "/infill", llamaVscodeFIM)
	if c.TokensCached == 0 || c.Truncated || c.TokensEvaluated <= warm.TokensEvaluated || c.Timings.PromptMS < 0 ||
		c.GenerationSettings == nil || !c.Stop {
		t.Fatalf("completion after the warm-up: %+v", c)
	}
}

// A warm-up of the whole prompt, then the same request generating: the
// prompt is found cached.
func TestInfillWarmupThenWarmCompletion(t *testing.T) {
	st := startStack(t, app.Options{})
	body := func(n int) string {
		return jsonBody(map[string]any{"input_prefix": "package main\n\nfunc main() {\n", "input_suffix": "\n}\n", "prompt": "\tfmt.", "n_predict": n, "temperature": 0})
	}
	warm := llamaDo[llamaCompletion](t, st, "/infill", body(0))
	c := llamaDo[llamaCompletion](t, st, "/infill", body(8))
	if c.TokensEvaluated != warm.TokensEvaluated || c.TokensCached < c.TokensEvaluated-1 || c.Timings.PromptN > 1 {
		t.Fatalf("warm-up %+v then %+v", warm, c)
	}
}

// An identical greedy request is answered from the completion cache: same
// content, the whole prompt cached, no work reported, nothing admitted.
func TestInfillCompletionCache(t *testing.T) {
	st := startStack(t, app.Options{})
	body := `{"input_prefix":"def add(a, b):\n","input_suffix":"\n","prompt":"    ","n_predict":12,"temperature":0}`
	first := llamaDo[llamaCompletion](t, st, "/infill", body)
	admitted := st.Sched.Stats().Admissions
	again := llamaDo[llamaCompletion](t, st, "/infill", body)
	if st.Sched.Stats().Admissions != admitted {
		t.Fatal("the cached answer was generated again")
	}
	if again.Content != first.Content || again.TokensPredicted != first.TokensPredicted || again.StopType != first.StopType ||
		again.TokensCached != again.TokensEvaluated || again.Timings.PromptN != 0 || again.Timings.PredictedN != 0 ||
		again.Timings.PredictedMS != 0 || again.Timings.CacheN != again.TokensEvaluated {
		t.Fatalf("first %+v\nagain %+v", first, again)
	}
	streamed := llamaEvents(t, st, "/infill", strings.Replace(body, "}", `,"stream":true}`, 1))
	var text strings.Builder
	for _, ev := range streamed {
		text.WriteString(ev.Content)
	}
	if last := streamed[len(streamed)-1]; text.String() != first.Content || !last.Stop {
		t.Fatalf("streamed %q, whole %q", text.String(), first.Content)
	}
}

// n_indent ends the completion at the first line after the first that is
// indented less, cut where its text starts.
func TestInfillNIndent(t *testing.T) {
	st := startStack(t, app.Options{})
	body := func(indent int) string {
		return jsonBody(map[string]any{"input_prefix": "def main():\n", "input_suffix": "\n", "prompt": "    x = 1", "n_predict": 400, "temperature": 0, "n_indent": indent})
	}
	free := llamaDo[llamaCompletion](t, st, "/infill", body(0))
	nl := strings.IndexByte(free.Content, '\n')
	rest := ""
	if nl >= 0 {
		rest = strings.TrimLeft(free.Content[nl+1:], " \t")
	}
	if rest == "" {
		t.Skipf("the greedy completion has no second line to cut: %q", free.Content)
	}
	want := free.Content[:len(free.Content)-len(rest)]
	cut := llamaDo[llamaCompletion](t, st, "/infill", body(1000))
	if cut.Content != want || cut.StopType != "limit" {
		t.Fatalf("n_indent 1000: %q (%s), want %q", cut.Content, cut.StopType, want)
	}
}

// Input past the context is cut by the FIM builder and reported as
// truncated, not refused.
func TestInfillTruncated(t *testing.T) {
	st := startStack(t, app.Options{})
	c := llamaDo[llamaCompletion](t, st, "/infill", jsonBody(map[string]any{
		"input_prefix": strings.Repeat("x = compute(x) + 1\n", 2000), "input_suffix": "\n", "n_predict": 4, "temperature": 0}))
	if !c.Truncated || c.TokensEvaluated >= 4096 {
		t.Fatalf("a prefix past the context: %+v", c)
	}
}

// A vocabulary without FIM tokens (Qwen2's) cannot fill in the middle:
// 501, in llama.cpp's shape for /infill and OpenAI's for a suffix.
func TestInfillWithoutFIMTokens(t *testing.T) {
	st := startStack(t, app.Options{ModelPath: model(t, "tiny", sharedVocab(t, "ggml-vocab-qwen2.gguf"))})
	status, body := llamaPost(t, st.URL()+"/infill", `{"input_prefix":"def f(","input_suffix":")\n"}`)
	if status != 501 {
		t.Fatalf("/infill: %d %s", status, body)
	}
	llamaError(t, status, body)
	status, body = llamaPost(t, st.URL()+"/v1/completions", `{"model":"tiny","prompt":"def f(","suffix":")\n"}`)
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if status != 501 || json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		t.Fatalf("/v1/completions with a suffix: %d %s", status, body)
	}
	if c := llamaDo[llamaCompletion](t, st, "/completion", `{"prompt":"def f(","n_predict":4,"temperature":0}`); c.TokensPredicted == 0 {
		t.Fatalf("/completion on the same model: %+v", c)
	}
}

// The real Qwen2.5 tokenizer grafted onto the tiny model: /infill builds
// Qwen2.5-Coder's repository-level FIM prompt from llama.vim's body.
func TestInfillQwen25Vocabulary(t *testing.T) {
	st := startStack(t, app.Options{ModelPath: model(t, "tiny", sharedVocab(t, "ggml-vocab-qwen2.5.gguf"))})
	body := strings.Replace(llamaVimFIM, `"tokens_cached"]`, `"tokens_cached", "prompt"]`, 1)
	got := llamaDo[map[string]json.RawMessage](t, st, "/infill", body)
	var prompt string
	json.Unmarshal(got["prompt"], &prompt)
	for _, marker := range []string{"<|repo_name|>", "<|file_sep|>config.py", "<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"} {
		if !strings.Contains(prompt, marker) {
			t.Errorf("the prompt lacks %q: %q", marker, prompt)
		}
	}
	if _, ok := got["content"]; !ok {
		t.Fatalf("no content: %v", got)
	}
}
