package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"superfluid/app"
)

// Tools, thinking and caching through the official Anthropic client, on
// the tiny synthetic model with Qwen3's tokenizer and template (<tool_call>
// blocks and a <think> reasoning block, found by probing the template).
// Random weights never call nor close their reasoning on their own: tool
// tests force the call with tool_choice (and turn thinking off, so the
// grammar holds from the first token), and the thinking test prefills an
// open <think> block.

func qwen3Stack(t *testing.T) *app.Stack {
	return startStack(t, app.Options{ModelPath: model(t, "tiny", sharedVocab(t, "ggml-vocab-qwen3.gguf"))})
}

// anthropicTools are get_weather and get_time as Anthropic tool params.
func anthropicTools(t *testing.T) []anthropic.ToolUnionParam {
	tool := func(name, desc, schema string) anthropic.ToolUnionParam {
		s := schemaValue(t, schema)
		in := anthropic.ToolInputSchemaParam{Properties: s["properties"], ExtraFields: map[string]any{"additionalProperties": false}}
		for _, r := range s["required"].([]any) {
			in.Required = append(in.Required, r.(string))
		}
		return anthropic.ToolUnionParam{OfTool: &anthropic.ToolParam{Name: name, Description: anthropic.String(desc), InputSchema: in}}
	}
	return []anthropic.ToolUnionParam{
		tool("get_weather", "The weather forecast of a city.", weatherSchema),
		tool("get_time", "The time in a zone.", clockSchema),
	}
}

var thinkingOff = anthropic.ThinkingConfigParamUnion{OfDisabled: &anthropic.ThinkingConfigDisabledParam{}}

func toolUses(m *anthropic.Message) []anthropic.ContentBlockUnion {
	var out []anthropic.ContentBlockUnion
	for _, b := range m.Content {
		if b.Type == "tool_use" {
			out = append(out, b)
		}
	}
	return out
}

// tool_choice any and tool force one call whose input validates against
// the tool's input_schema; stop_reason is tool_use; streamed, the
// input_json_delta pieces reassemble into the same input, and the
// streamed reply equals the unstreamed one (greedy).
func TestAnthropicToolUseForced(t *testing.T) {
	st := qwen3Stack(t)
	c := anthropicClient(st)
	for _, tc := range []struct {
		name   string
		choice anthropic.ToolChoiceUnionParam
		want   string
	}{
		{"any", anthropic.ToolChoiceUnionParam{OfAny: &anthropic.ToolChoiceAnyParam{DisableParallelToolUse: anthropic.Bool(true)}}, ""},
		{"tool", anthropic.ToolChoiceUnionParam{OfTool: &anthropic.ToolChoiceToolParam{Name: "get_time", DisableParallelToolUse: anthropic.Bool(true)}}, "get_time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := anthropicGreedy(200, anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?")))
			params.Tools, params.ToolChoice, params.Thinking = anthropicTools(t), tc.choice, thinkingOff
			msg, err := c.Messages.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("reply: %s", msg.RawJSON())
			uses := toolUses(msg)
			if msg.StopReason != anthropic.StopReasonToolUse || len(uses) != 1 {
				t.Fatalf("stop_reason %q with %d tool_use blocks, want tool_use with one", msg.StopReason, len(uses))
			}
			use := uses[0]
			if !strings.HasPrefix(use.ID, "toolu_") || tc.want != "" && use.Name != tc.want {
				t.Errorf("tool_use id %q name %q", use.ID, use.Name)
			}
			checkCall(t, tc.name, use.Name, string(use.Input))

			// Streamed: the raw events, and the SDK's accumulation.
			stream := c.Messages.NewStreaming(context.Background(), params)
			var acc anthropic.Message
			var partial strings.Builder
			var order []string
			for stream.Next() {
				ev := stream.Current()
				if err := acc.Accumulate(ev); err != nil {
					t.Fatalf("accumulate %s: %v", ev.RawJSON(), err)
				}
				switch ev.Type {
				case "content_block_start":
					order = append(order, "start:"+ev.ContentBlock.Type)
					if in, _ := json.Marshal(ev.ContentBlock.Input); ev.ContentBlock.Type == "tool_use" && string(in) != "{}" {
						t.Errorf("tool_use starts with input %s, want {}", in)
					}
				case "content_block_delta":
					order = append(order, ev.Delta.Type)
					if ev.Delta.Type == "input_json_delta" {
						partial.WriteString(ev.Delta.PartialJSON)
					}
				case "content_block_stop":
					order = append(order, "stop")
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			stream.Close()
			if got := strings.Join(order, " "); !strings.Contains(got, "start:tool_use input_json_delta stop") {
				t.Errorf("block events %q", got)
			}
			suses := toolUses(&acc)
			if acc.StopReason != anthropic.StopReasonToolUse || len(suses) != 1 {
				t.Fatalf("streamed: stop_reason %q with %d tool_use blocks", acc.StopReason, len(suses))
			}
			if !sameJSON(t, partial.String(), string(suses[0].Input)) || !sameJSON(t, string(suses[0].Input), string(use.Input)) || suses[0].Name != use.Name {
				t.Errorf("streamed input %s (deltas %s), unstreamed %s", suses[0].Input, partial.String(), use.Input)
			}
		})
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// A tool loop's second turn: the call and its tool_result (and an error
// result) reach the prompt as the template renders OpenAI's tool messages
// — count_tokens equals the tokens of /apply-template's rendering of the
// same conversation, which holds the results — and the turn runs.
func TestAnthropicToolResultReachesPrompt(t *testing.T) {
	st := qwen3Stack(t)
	c := anthropicClient(st)
	msgs := []anthropic.MessageParam{
		anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris, time in UTC?")),
		anthropic.NewAssistantMessage(
			anthropic.NewToolUseBlock("toolu_01", map[string]any{"city": "Paris", "days": 1}, "get_weather"),
			anthropic.NewToolUseBlock("toolu_02", map[string]any{"zone": "UTC"}, "get_time")),
		anthropic.NewUserMessage(
			anthropic.NewToolResultBlock("toolu_01", "sunny, 21 degrees", false),
			anthropic.NewToolResultBlock("toolu_02", "clock unavailable", true)),
	}
	params := anthropicGreedy(8, msgs...)
	params.Tools, params.Thinking = anthropicTools(t), thinkingOff
	count, err := c.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "tiny", Messages: msgs,
		Tools: countTools(anthropicTools(t)), Thinking: params.Thinking}, option.WithJSONSet("temperature", nil))
	if err != nil {
		t.Fatal(err)
	}
	// The same conversation as OpenAI messages, rendered by /apply-template.
	var tools []map[string]any
	for _, tl := range [][2]string{{"get_weather", weatherSchema}, {"get_time", clockSchema}} {
		desc := map[string]string{"get_weather": "The weather forecast of a city.", "get_time": "The time in a zone."}[tl[0]]
		tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": tl[0], "description": desc, "parameters": schemaValue(t, tl[1])}})
	}
	oai := map[string]any{"tools": tools, "chat_template_kwargs": map[string]any{"enable_thinking": false}, "messages": []map[string]any{
		{"role": "user", "content": "Weather in Paris, time in UTC?"},
		{"role": "assistant", "content": "", "tool_calls": []map[string]any{
			{"id": "toolu_01", "type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city":"Paris","days":1}`}},
			{"id": "toolu_02", "type": "function", "function": map[string]any{"name": "get_time", "arguments": `{"zone":"UTC"}`}}}},
		{"role": "tool", "tool_call_id": "toolu_01", "content": "sunny, 21 degrees"},
		{"role": "tool", "tool_call_id": "toolu_02", "content": "Error: clock unavailable"},
	}}
	var rendered struct {
		Prompt string `json:"prompt"`
	}
	postJSONTo(t, st, "/apply-template", oai, 200, &rendered)
	for _, want := range []string{"<tool_response>\nsunny, 21 degrees\n</tool_response>", "<tool_response>\nError: clock unavailable\n</tool_response>", `"arguments": {"city": "Paris", "days": 1}`} {
		if !strings.Contains(rendered.Prompt, want) {
			t.Errorf("rendering lacks %q:\n%s", want, rendered.Prompt)
		}
	}
	var toks struct {
		Tokens []int `json:"tokens"`
	}
	postJSONTo(t, st, "/tokenize", map[string]any{"content": rendered.Prompt, "add_special": true}, 200, &toks)
	if int(count.InputTokens) != len(toks.Tokens) {
		t.Errorf("count_tokens %d, /apply-template's rendering is %d tokens", count.InputTokens, len(toks.Tokens))
	}
	msg, err := c.Messages.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if total := msg.Usage.InputTokens + msg.Usage.CacheReadInputTokens + msg.Usage.CacheCreationInputTokens; total != count.InputTokens {
		t.Errorf("usage %+v, count_tokens %d", msg.Usage, count.InputTokens)
	}
}

func countTools(in []anthropic.ToolUnionParam) []anthropic.MessageCountTokensToolUnionParam {
	out := make([]anthropic.MessageCountTokensToolUnionParam, len(in))
	for i, t := range in {
		out[i] = anthropic.MessageCountTokensToolUnionParam{OfTool: t.OfTool}
	}
	return out
}

// thinking enabled: a reply that starts inside the reasoning block (a
// prefill of "<think>" opens it; random weights never close it) comes back as a
// thinking block with a signature, streamed as thinking_delta pieces and
// a signature_delta; the unstreamed and streamed thinking agree.
func TestAnthropicThinkingBlock(t *testing.T) {
	st := qwen3Stack(t)
	c := anthropicClient(st)
	// budget_tokens must be at least 1024 and below max_tokens: the
	// smallest max_tokens it allows.
	short := anthropicGreedy(1025, anthropic.NewUserMessage(anthropic.NewTextBlock("Why is the sky blue?")),
		anthropic.NewAssistantMessage(anthropic.NewTextBlock("<think>")))
	short.Thinking = anthropic.ThinkingConfigParamOfEnabled(1024)
	msg, err := c.Messages.New(context.Background(), short)
	if err != nil {
		t.Fatal(err)
	}
	var thinking []anthropic.ContentBlockUnion
	for _, b := range msg.Content {
		if b.Type == "thinking" {
			thinking = append(thinking, b)
		}
	}
	if len(thinking) != 1 || thinking[0].Thinking == "" || thinking[0].Signature == "" {
		t.Fatalf("content %s, want one thinking block with text and a signature", msg.RawJSON())
	}
	acc, events := anthropicStream(t, c, short)
	joined := strings.Join(events, " ")
	if !strings.Contains(joined, "content_block_start content_block_delta") {
		t.Errorf("events %s", joined)
	}
	if len(acc.Content) == 0 || acc.Content[0].Type != "thinking" || acc.Content[0].Thinking != thinking[0].Thinking || acc.Content[0].Signature != thinking[0].Signature {
		t.Errorf("streamed %s, unstreamed thinking %q", acc.RawJSON(), thinking[0].Thinking)
	}
	// budget_tokens is checked as Anthropic checks it.
	bad := short
	bad.MaxTokens = 1000
	if _, err := c.Messages.New(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "budget_tokens") {
		t.Errorf("budget above max_tokens: %v", err)
	}
}

// Claude Code's billing header changes its cch nonce every request; with
// it dropped, two requests that differ only in the nonce share the whole
// prompt in the prefix cache. A cache_control breakpoint on the system
// prompt is reported as cache creation on the cold request.
func TestAnthropicBillingNonceKeepsCache(t *testing.T) {
	st := qwen3Stack(t)
	c := anthropicClient(st)
	system := strings.Repeat("You are a careful coding agent. Read files before editing them. ", 12)
	ask := func(nonce string) anthropic.Usage {
		params := anthropicGreedy(4, anthropic.NewUserMessage(anthropic.NewTextBlock("List the files.")))
		params.System = []anthropic.TextBlockParam{
			{Text: "x-anthropic-billing-header: cc_version=2.1.88.a3f; cc_entrypoint=cli; cch=" + nonce + ";"},
			{Text: system, CacheControl: anthropic.CacheControlEphemeralParam{TTL: anthropic.CacheControlEphemeralTTLTTL1h}},
		}
		params.Tools, params.Thinking = anthropicTools(t), thinkingOff
		msg, err := c.Messages.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("nonce %s: usage %s", nonce, msg.Usage.RawJSON())
		return msg.Usage
	}
	cold := ask("1f3a9")
	if cold.CacheReadInputTokens != 0 || cold.CacheCreationInputTokens < 100 {
		t.Errorf("cold request: usage %+v, want the marked system prompt created", cold)
	}
	// The breakpoint pinned the marked prefix in the prefix cache.
	if n := st.Cache.Pins(); n != 1 {
		t.Errorf("%d pins in the prefix cache, want the system prompt's", n)
	}
	warm := ask("c07e2")
	total := warm.InputTokens + warm.CacheReadInputTokens + warm.CacheCreationInputTokens
	if warm.CacheReadInputTokens != total-1 || warm.CacheCreationInputTokens != 0 {
		t.Errorf("second request with another nonce: usage %+v, want all but the last of %d tokens read from the cache", warm, total)
	}
}
