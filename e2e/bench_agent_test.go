package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	"superfluid/app"
	sfhttp "superfluid/http"
)

// BenchmarkAgentLoop is a coding agent's tool loop as Claude Code drives
// it over the Anthropic API: a 4,000-token system prompt and 20 tools,
// ten turns, each adding the model's call and the tool's result, and a
// billing-header nonce in the first system block that changes every
// request. A turn should evaluate only what it added. The same loop with
// the nonce kept (--keep-billing-header), two turns, is the baseline: the
// nonce sits before everything, so every turn pays for the whole prompt.
func BenchmarkAgentLoop(b *testing.B) {
	path := benchModel(b)
	for _, keep := range []bool{false, true} {
		name := "nonce-dropped"
		turns := 10
		if keep {
			name, turns = "nonce-kept", 2
		}
		b.Run(name, func(b *testing.B) {
			st := startStack(b, app.Options{ModelPath: path, Alias: "bench", Lanes: 2, Threads: benchThreads, Ctx: 16384,
				HTTP: sfhttp.Config{KeepBillingHeader: keep}})
			for range b.N {
				runAgentLoop(b, st, turns)
			}
		})
	}
}

// agentTurn is what one turn of the loop measured.
type agentTurn struct {
	input, cached, created int
	ttft                   time.Duration
}

func runAgentLoop(b *testing.B, st *app.Stack, turns int) {
	rng := rand.New(rand.NewPCG(7, 7))
	system := agentSystemPrompt(b, st, rng, 4000)
	tools := agentToolDefs(20)
	msgs := []any{map[string]any{"role": "user", "content": "Fix the failing test in the parser package."}}
	prevInput := 0
	for turn := 1; turn <= turns; turn++ {
		nonce := fmt.Sprintf("x-anthropic-billing-header: cc_version=2.1.37.abc; cc_entrypoint=cli; cch=%08x;", rng.Uint32())
		body := map[string]any{
			"model": "bench", "max_tokens": 96, "stream": true, "temperature": 0,
			"system": []any{
				map[string]any{"type": "text", "text": nonce},
				map[string]any{"type": "text", "text": system, "cache_control": map[string]any{"type": "ephemeral"}},
			},
			"tools": tools, "tool_choice": map[string]any{"type": "any"}, "messages": msgs,
		}
		res, call := agentRequest(b, st, body)
		b.Logf("turn %2d: input %5d tokens (+%4d new), cache read %5d, evaluated %5d, created %5d, TTFT %6.0f ms",
			turn, res.input, res.input-prevInput, res.cached, res.input-res.cached, res.created, float64(res.ttft.Microseconds())/1000)
		b.ReportMetric(float64(res.input-res.cached), fmt.Sprintf("evaluated/turn%d", turn))
		b.ReportMetric(float64(res.ttft.Milliseconds()), fmt.Sprintf("ttft-ms/turn%d", turn))
		prevInput = res.input
		result := fmt.Sprintf("exit status 1\n--- FAIL: TestParse%d (0.00s)\n    parse_test.go:%d: %s", turn, 40+turn, agentWords(rng, 80))
		msgs = append(msgs,
			map[string]any{"role": "assistant", "content": []any{call}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": call["id"], "content": result}}})
	}
}

// agentRequest streams one turn, returning its usage and TTFT and the
// tool_use block the model answered with.
func agentRequest(b *testing.B, st *app.Stack, body map[string]any) (agentTurn, map[string]any) {
	raw, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	resp, err := http.Post(st.URL()+"/v1/messages", "application/json", bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		var msg bytes.Buffer
		msg.ReadFrom(resp.Body)
		b.Fatalf("status %d: %s", resp.StatusCode, msg.String())
	}
	var (
		t    agentTurn
		call map[string]any
		args strings.Builder
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Message struct {
				Usage agentUsage `json:"usage"`
			} `json:"message"`
			Usage        *agentUsage    `json:"usage"`
			ContentBlock map[string]any `json:"content_block"`
			Delta        struct {
				PartialJSON string `json:"partial_json"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			b.Fatalf("event %q: %v", line, err)
		}
		switch ev.Type {
		case "message_start":
			t.input, t.cached, t.created = ev.Message.Usage.total()
		case "content_block_start":
			if t.ttft == 0 {
				t.ttft = time.Since(start)
			}
			if ev.ContentBlock["type"] == "tool_use" {
				call = ev.ContentBlock
			}
		case "content_block_delta":
			args.WriteString(ev.Delta.PartialJSON)
		case "message_delta":
			if ev.Usage != nil && ev.Usage.Input > 0 {
				t.input, t.cached, t.created = ev.Usage.total()
			}
		}
	}
	if call == nil {
		b.Fatal("the turn made no tool_use block (tool_choice any)")
	}
	var input any
	if err := json.Unmarshal([]byte(args.String()), &input); err != nil {
		b.Fatalf("the call's input %q is not JSON: %v", args.String(), err)
	}
	call["input"] = input
	return t, call
}

// agentUsage is Anthropic's usage: input_tokens counts only what was
// neither read from the cache nor written to it.
type agentUsage struct {
	Input   int `json:"input_tokens"`
	Read    int `json:"cache_read_input_tokens"`
	Created int `json:"cache_creation_input_tokens"`
}

func (u agentUsage) total() (input, cached, created int) {
	return u.Input + u.Read + u.Created, u.Read, u.Created
}

// agentSystemPrompt is a system prompt of about n tokens of this model:
// words tokenized and cut back to n tokens through the server's own
// /tokenize and /detokenize.
func agentSystemPrompt(b *testing.B, st *app.Stack, rng *rand.Rand, n int) string {
	text := "You are a coding agent working in a repository. " + agentWords(rng, n)
	var toks struct {
		Tokens []int `json:"tokens"`
	}
	postJSONTo(b, st, "/tokenize", map[string]any{"content": text}, 200, &toks)
	if len(toks.Tokens) > n {
		toks.Tokens = toks.Tokens[:n]
	}
	var out struct {
		Content string `json:"content"`
	}
	postJSONTo(b, st, "/detokenize", map[string]any{"tokens": toks.Tokens}, 200, &out)
	return out.Content
}

var agentVocab = strings.Fields("the parser test file function error value buffer token stream cache lane model request reply call tool result package module build commit branch line column offset byte string number array object field schema grammar")

func agentWords(rng *rand.Rand, n int) string {
	w := make([]string, n)
	for i := range w {
		w[i] = agentVocab[rng.IntN(len(agentVocab))]
	}
	return strings.Join(w, " ")
}

func agentToolDefs(n int) []any {
	tools := make([]any, n)
	for i := range tools {
		tools[i] = map[string]any{
			"name":        fmt.Sprintf("tool_%02d", i),
			"description": fmt.Sprintf("Tool %d of the agent: reads or edits files.", i),
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{
				"path": map[string]any{"type": "string", "maxLength": 24}, "line": map[string]any{"type": "integer", "minimum": 1, "maximum": 999},
			}, "required": []string{"path", "line"}, "additionalProperties": false},
		}
	}
	return tools
}
