package http

import (
	"strings"
	"testing"

	"superfluid/sched"
)

var anthropicSeeds = []string{
	`{"model":"tiny","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`,
	`{"model":"tiny","max_tokens":8,"system":"be brief","stream":true,"temperature":0,"top_k":5,"top_p":0.5,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":8,"system":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"Sure"}]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"system","content":[{"type":"text","text":"s"}]}],"stop_sequences":["\n\n","END"]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}],"tools":[{"name":"f"}]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"assistant","content":"ok "}],"thinking":{"type":"enabled","budget_tokens":1024}}`,
	`{"model":"claude-x","messages":[{"role":"user","content":""}],"output_config":{"format":{"type":"json_schema"}}}`,
	`{"model":"tiny","max_tokens":1e12,"temperature":1.5,"messages":[{"role":"user"}]}`,
	// Poison values: each is normalized or refused before the scheduler.
	`{"model":"tiny","max_tokens":8,"temperature":1e-40,"top_p":1e-50,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":1e30,"top_k":1e30,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":8,"tool_choice":{"type":"any"},"output_format":{"type":"json_schema"},"mcp_servers":[{}],"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":8,"tool_choice":{"type":"auto"},"thinking":{"type":"disabled"},"tools":[],"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":"` + strings.Repeat("x", 16*128+1) + `"}]}`,
}

// Decoding and validating any /v1/messages body never panics: it is
// refused with a client error or becomes a spec the scheduler accepts;
// count_tokens renders the same prompt.
func FuzzAnthropicRequest(f *testing.F) {
	for _, s := range anthropicSeeds {
		f.Add([]byte(s))
	}
	m := chatmlModel(f, 128)
	srv, err := NewServer(Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := requestCtx(body)
		var req anthropicRequest
		if err := decodeJSON(ctx, &req); err != nil {
			checkRefusal(t, err)
			return
		}
		prompt, perr := anthropicPrompt(m, &req)
		g, err := srv.anthropicSpec(ctx, m, &req)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		checkSpec(t, m, g)
		if perr != nil || len(prompt) != len(g.Prompt) || g.MaxTokens < 1 || g.Class != sched.Chat {
			t.Fatalf("count_tokens prompt %d (%v), spec %+v", len(prompt), perr, g)
		}
	})
}
