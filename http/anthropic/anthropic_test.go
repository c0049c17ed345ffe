package anthropic

import (
	"strings"
	"testing"

	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

func specOf(t *testing.T, m *task.Model, body string) (*task.Request, error) {
	t.Helper()
	ctx := tasktest.RequestCtx([]byte(body))
	var req request
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return nil, err
	}
	p, err := testAPI(false).prepare(ctx, m, &req)
	if err != nil {
		return nil, err
	}
	return p.g, nil
}

// The prompt is the chat template over system, then the turns: text blocks
// joined by a blank line, consecutive turns of a role combined, system
// turns kept, a final assistant turn continued.
func TestAnthropicPrompt(t *testing.T) {
	m := tasktest.ChatMLModel(t, 512)
	cases := map[string]string{
		`{"system":"s","messages":[{"role":"user","content":"hi"}]}`: "<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
		`{"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}]}`: "<|im_start|>system\na\n\nb<|im_end|>\n<|im_start|>user\nx\n\ny<|im_end|>\n<|im_start|>assistant\n",
		`{"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"Sure"}]}`:                                                  "<|im_start|>user\na\n\nb<|im_end|>\n<|im_start|>assistant\nSure",
		`{"messages":[{"role":"user","content":"a"},{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"user","content":"b"}]}`:                               "<|im_start|>user\na<|im_end|>\n<|im_start|>system\ns<|im_end|>\n<|im_start|>user\nb<|im_end|>\n<|im_start|>assistant\n",
		`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""}]}`:                                                                                   "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
	}
	for body, want := range cases {
		g, err := specOf(t, m, strings.Replace(body, "{", `{"model":"tiny","max_tokens":4,`, 1))
		if err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		if got := m.Text.Detokenize(g.Prompt, true); got != want {
			t.Errorf("%s:\n got %q\nwant %q", body, got, want)
		}
	}
}

// Sampling and limits: Anthropic's default temperature 1, its [0, 1]
// range, top_k/top_p passed on, the class from the header.
func TestAnthropicSpec(t *testing.T) {
	m := tasktest.ChatMLModel(t, 512)
	g, err := specOf(t, m, `{"model":"tiny:latest","max_tokens":7,"messages":[{"role":"user","content":"hi"}],"top_k":5,"top_p":0.5,"stop_sequences":["x"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if g.MaxTokens != 7 || g.Sampling.Temperature != 1 || g.Sampling.TopK != 5 || g.Sampling.TopP != 0.5 || len(g.Stop) != 1 || g.Class != sched.Chat {
		t.Errorf("spec %+v", g)
	}
	for body, want := range map[string]string{
		`{"model":"tiny","messages":[{"role":"user","content":"hi"}]}`:                                   "max_tokens: Field required",
		`{"model":"tiny","max_tokens":4,"temperature":1.01,"messages":[{"role":"user","content":"hi"}]}`: "temperature",
		`{"model":"tiny","max_tokens":4,"messages":[{"role":"assistant","content":"hi\n"}]}`:             "trailing whitespace",
		`{"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":[{"type":"document"}]}]}`:   `"document"`,
	} {
		_, err := specOf(t, m, body)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", body, err, want)
		}
	}
}

func TestAnthropicStopReasonAndUsage(t *testing.T) {
	call := []reply.ToolCall{{Name: "f", Arguments: []byte(`{}`)}}
	for _, tc := range []struct {
		out    wire.TurnOut
		reason string
		seq    string
	}{
		{wire.TurnOut{Outcome: task.Outcome{Finish: "stop"}}, "end_turn", ""},
		{wire.TurnOut{Outcome: task.Outcome{Finish: "stop", StopWord: "END"}}, "stop_sequence", "END"},
		{wire.TurnOut{Outcome: task.Outcome{Finish: "length"}}, "max_tokens", ""},
		{wire.TurnOut{Outcome: task.Outcome{Finish: "stop"}, Calls: call}, "tool_use", ""},
		{wire.TurnOut{Outcome: task.Outcome{Finish: "length"}, Calls: call}, "max_tokens", ""},
	} {
		reason, seq := stopReason(tc.out)
		if reason != tc.reason || (seq == nil) != (tc.seq == "") || seq != nil && *seq != tc.seq {
			t.Errorf("%+v: %s %v", tc.out, reason, seq)
		}
	}
	u := usageOf(10, 0, task.Outcome{Completed: 3, Result: sched.Result{CachedTokens: 8}})
	if u.InputTokens != 2 || u.CacheReadInputTokens != 8 || u.OutputTokens != 3 || u.CacheCreationInputTokens != 0 {
		t.Errorf("usage %+v", u)
	}
	// A marked prefix of 9: 8 read, 1 created, 1 plain input.
	u = usageOf(10, 9, task.Outcome{Result: sched.Result{CachedTokens: 8}})
	if u.InputTokens != 1 || u.CacheReadInputTokens != 8 || u.CacheCreationInputTokens != 1 {
		t.Errorf("usage with a breakpoint %+v", u)
	}
}
