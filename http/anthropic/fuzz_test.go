package anthropic

import (
	"strings"
	"testing"

	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/task/tasktest"
)

var requestSeeds = []string{
	`{"model":"tiny","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`,
	`{"model":"tiny","max_tokens":8,"system":"be brief","stream":true,"temperature":0,"top_k":5,"top_p":0.5,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":8,"system":[{"type":"text","text":"a"},{"type":"text","text":"b","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"Sure"}]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"system","content":[{"type":"text","text":"s"}]}],"stop_sequences":["\n\n","END"]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}],"tools":[{"name":"f"}]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}},{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]}]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}]}]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"assistant","content":"ok "}],"thinking":{"type":"enabled","budget_tokens":1024}}`,
	`{"model":"claude-x","messages":[{"role":"user","content":""}],"output_config":{"format":{"type":"json_schema"}}}`,
	`{"model":"tiny","max_tokens":1e12,"temperature":1.5,"messages":[{"role":"user"}]}`,
	// Poison values: each is normalized or refused before the scheduler.
	`{"model":"tiny","max_tokens":8,"temperature":1e-40,"top_p":1e-50,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":1e30,"top_k":1e30,"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":8,"tool_choice":{"type":"any"},"output_format":{"type":"json_schema"},"mcp_servers":[{}],"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":8,"tool_choice":{"type":"auto"},"thinking":{"type":"disabled"},"tools":[],"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":"` + strings.Repeat("x", 16*128+1) + `"}]}`,
	`{"model":"tiny","max_tokens":8,"tools":[{"name":"f","input_schema":{"type":"object","properties":{"a":{"type":"string"}}},"cache_control":{"type":"ephemeral"}},{"type":"bash_20250124","name":"bash"}],"tool_choice":{"type":"tool","name":"f","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"tiny","max_tokens":8,"system":[{"type":"text","text":"x-anthropic-billing-header: cch=1;"},{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"toolu_1","name":"f","input":{"a":"b"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"r"}],"is_error":true,"cache_control":{"type":"ephemeral"}}]}],"cache_control":{"type":"ephemeral"}}`,
	`{"model":"tiny","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"redacted_thinking","data":"x"}]}]}`,
}

// Decoding and validating any /v1/messages body never panics: it is
// refused with a client error or becomes a spec the scheduler accepts;
// count_tokens renders the same prompt.
func FuzzAnthropicRequest(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	m := tasktest.ChatMLModel(f, 128)
	a := testAPI(false)
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := tasktest.RequestCtx(body)
		var req request
		if err := wire.DecodeJSON(ctx, &req); err != nil {
			tasktest.CheckRefusal(t, err)
			return
		}
		p, err := a.prepare(ctx, m, &req)
		if err != nil {
			tasktest.CheckRefusal(t, err)
			return
		}
		g := p.g
		tasktest.CheckSpec(t, m, g)
		turn, _, terr := a.readTurn(m, &req, countTokensLimit)
		var counted int
		if terr == nil {
			plan, perr := task.PlanChat(m, &turn.Chat)
			if terr = perr; perr == nil {
				counted = len(plan.Prompt)
			}
		}
		if terr != nil || counted != len(g.Prompt) || g.MaxTokens < 1 || g.Class != sched.Chat && g.Class != sched.Agent {
			t.Fatalf("count_tokens prompt %d (%v), spec %+v", counted, terr, g)
		}
	})
}
