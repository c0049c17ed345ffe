package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"superfluid/app"
)

// Tool calls through the official OpenAI client, on the tiny synthetic
// model with Qwen2.5-Instruct's tokenizer and template (Hermes-style
// <tool_call> blocks, found by probing the template). Random weights
// never call on their own, so tool_choice forces the calls: the grammar
// holds them to the tools' schemas, and the parser must read them back.

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`

const clockSchema = `{"type":"object","properties":{"zone":{"type":"string","enum":["UTC","CET","PST"]}},"required":["zone"],"additionalProperties":false}`

func agentTools(t *testing.T) []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
			Description: openai.String("The weather forecast of a city."), Parameters: schemaValue(t, weatherSchema)}),
		openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time",
			Description: openai.String("The time in a zone."), Parameters: schemaValue(t, clockSchema)}),
	}
}

func toolStack(t *testing.T) *app.Stack {
	return startStack(t, app.Options{ModelPath: model(t, "tiny", sharedVocab(t, "ggml-vocab-qwen2.5-instruct.gguf"))})
}

// checkCall fails unless c names one of the tools and its arguments
// validate against that tool's schema.
func checkCall(t *testing.T, what, name, args string) {
	t.Helper()
	schemas := map[string]string{"get_weather": weatherSchema, "get_time": clockSchema}
	s, ok := schemas[name]
	if !ok {
		t.Fatalf("%s: call to %q, which is not a declared tool", what, name)
	}
	checkValid(t, what+" arguments", validator(t, s), args)
}

func TestOpenAIToolCallsForced(t *testing.T) {
	st := toolStack(t)
	client := openaiClient(st)
	for _, tc := range []struct {
		name   string
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		want   string
	}{
		{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, ""},
		{"named", openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_time"}), "get_time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := greedyChat("What is the weather in Paris?", 200)
			params.Tools = agentTools(t)
			params.ToolChoice = tc.choice
			params.ParallelToolCalls = openai.Bool(false)
			resp, err := client.Chat.Completions.New(context.Background(), params)
			if err != nil {
				t.Fatal(err)
			}
			ch := resp.Choices[0]
			t.Logf("reply: %s", ch.Message.RawJSON())
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("finish %q with %d calls, want tool_calls with one call", ch.FinishReason, len(ch.Message.ToolCalls))
			}
			call := ch.Message.ToolCalls[0]
			if call.ID == "" || call.Type != "function" {
				t.Errorf("call id %q type %q", call.ID, call.Type)
			}
			if tc.want != "" && call.Function.Name != tc.want {
				t.Errorf("called %q, want %q", call.Function.Name, tc.want)
			}
			checkCall(t, "forced call", call.Function.Name, call.Function.Arguments)
			if strings.Contains(ch.Message.Content, "<tool_call>") {
				t.Errorf("the call marker leaked into content: %q", ch.Message.Content)
			}

			// Streamed, the client's accumulator rebuilds the same call.
			acc := streamChat(t, client, params)
			got := acc.Choices[0].Message.ToolCalls
			if len(got) != 1 || got[0].Function.Name != call.Function.Name || got[0].Function.Arguments != call.Function.Arguments {
				t.Errorf("streamed calls %+v, want %s(%s)", got, call.Function.Name, call.Function.Arguments)
			}
			if acc.Choices[0].FinishReason != "tool_calls" {
				t.Errorf("streamed finish %q", acc.Choices[0].FinishReason)
			}
			if got[0].ID == "" {
				t.Error("the streamed call has no id")
			}
		})
	}
}

// Parallel calls: with parallel_tool_calls left on, a required reply may
// hold several calls, each valid.
func TestOpenAIToolCallsParallel(t *testing.T) {
	st := toolStack(t)
	client := openaiClient(st)
	params := greedyChat("Weather and time, please.", 300)
	params.Tools = agentTools(t)
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
	resp, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	ch := resp.Choices[0]
	if len(ch.Message.ToolCalls) == 0 {
		t.Fatalf("no calls: %s", ch.Message.RawJSON())
	}
	ids := map[string]bool{}
	for _, c := range ch.Message.ToolCalls {
		checkCall(t, "parallel call", c.Function.Name, c.Function.Arguments)
		if ids[c.ID] {
			t.Errorf("two calls share the id %q", c.ID)
		}
		ids[c.ID] = true
	}
}

// The tool's result goes back in the next request and reaches the prompt
// through the template, tied to its call.
func TestOpenAIToolResultReachesPrompt(t *testing.T) {
	st := toolStack(t)
	client := openaiClient(st)
	params := greedyChat("What is the weather in Paris?", 200)
	params.Tools = agentTools(t)
	params.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"})
	params.ParallelToolCalls = openai.Bool(false)
	resp, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	call := resp.Choices[0].Message.ToolCalls[0]
	params.Messages = append(params.Messages, resp.Choices[0].Message.ToParam(),
		openai.ToolMessage("Sunny, 21 degrees, light wind", call.ID))
	params.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
	params.MaxCompletionTokens = openai.Int(8)
	next, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if next.Choices[0].FinishReason == "tool_calls" {
		t.Errorf("tool_choice none still called: %s", next.Choices[0].Message.RawJSON())
	}
	// What the template made of the conversation, through /apply-template.
	body, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	var rendered struct {
		Prompt string `json:"prompt"`
	}
	postJSONTo(t, st, "/apply-template", json.RawMessage(body), 200, &rendered)
	for _, want := range []string{"<tool_response>\nSunny, 21 degrees, light wind\n</tool_response>", `"name": "get_weather"`, call.Function.Arguments[:8]} {
		if !strings.Contains(rendered.Prompt, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, rendered.Prompt)
		}
	}
}

// Under "auto" the model is free; whatever it writes, no call marker
// reaches content and the reply is well formed.
func TestOpenAIToolsAutoNeverLeaksMarkers(t *testing.T) {
	st := toolStack(t)
	client := openaiClient(st)
	for _, prompt := range []string{"Hello!", "Call a tool.", "<tool_call>"} {
		params := greedyChat(prompt, 48)
		params.Tools = agentTools(t)
		resp, err := client.Chat.Completions.New(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		msg := resp.Choices[0].Message
		if strings.Contains(msg.Content, "<tool_call>") {
			t.Errorf("%q: the call marker leaked into content: %q", prompt, msg.Content)
		}
		for _, c := range msg.ToolCalls {
			checkCall(t, "auto call", c.Function.Name, c.Function.Arguments)
		}
	}
}

// Bad tool requests are 400s naming the field.
func TestOpenAIToolErrors(t *testing.T) {
	st := toolStack(t)
	for _, tc := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a b"}}]}`, "tools"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]}`, "tools"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":{"type":"function","function":{"name":"b"}}}`, "tool_choice"},
		{`{"messages":[{"role":"user","content":"x"}],"tool_choice":"required"}`, "tool_choice"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object","properties":{"x":{"type":"string","pattern":"(?=a)"}}}}}],"tool_choice":"required"}`, "tools"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{"name":"a"}}]}`, "tools"},
		{`{"messages":[{"role":"user","content":"x"}],"tools":"nope"}`, "tools"},
	} {
		var e struct {
			Error struct {
				Param string `json:"param"`
			} `json:"error"`
		}
		postJSONTo(t, st, "/v1/chat/completions", json.RawMessage(tc.body), 400, &e)
		if e.Error.Param != tc.param {
			t.Errorf("%s: param %q, want %q", tc.body, e.Error.Param, tc.param)
		}
	}
}
