package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"superfluid/app"
)

// Ollama's client with tools and thinking, on the tiny model with real
// tokenizers and templates. Ollama has no tool_choice, so a random model
// calls only by chance: these check what a client relies on either way —
// the capabilities /api/show reports from the template, a reply whose
// content carries no marker, and calls (if any) with object arguments.

func ollamaWeatherTool() api.Tool {
	props := api.NewToolPropertiesMap()
	props.Set("city", api.ToolProperty{Type: api.PropertyType{"string"}, Description: "The city."})
	return api.Tool{Type: "function", Function: api.ToolFunction{Name: "get_weather", Description: "Weather of a city.",
		Parameters: api.ToolFunctionParameters{Type: "object", Required: []string{"city"}, Properties: props}}}
}

func TestOllamaClientTools(t *testing.T) {
	st := startStack(t, app.Options{ModelPath: model(t, "tiny", sharedVocab(t, "ggml-vocab-qwen2.5-instruct.gguf"))})
	c := ollamaClient(t, st)
	show, err := c.Show(context.Background(), &api.ShowRequest{Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCapability(show.Capabilities, "tools") || hasCapability(show.Capabilities, "thinking") {
		t.Errorf("Qwen2.5's template: capabilities %v, want tools and no thinking", show.Capabilities)
	}
	for _, stream := range []bool{false, true} {
		var calls []api.ToolCall
		var text strings.Builder
		err := c.Chat(context.Background(), &api.ChatRequest{Model: "tiny", Stream: &stream, Tools: api.Tools{ollamaWeatherTool()},
			Messages: []api.Message{{Role: "user", Content: "Weather in Paris?"}}, Options: ollamaGreedy(40)}, func(r api.ChatResponse) error {
			text.WriteString(r.Message.Content)
			calls = append(calls, r.Message.ToolCalls...)
			return nil
		})
		if err != nil {
			t.Fatalf("stream=%v: %v", stream, err)
		}
		if strings.Contains(text.String(), "<tool_call>") {
			t.Errorf("stream=%v: the call marker leaked into content: %q", stream, text.String())
		}
		for _, call := range calls {
			if call.Function.Name != "get_weather" {
				t.Errorf("a call to %q", call.Function.Name)
			}
		}
	}
	// History with a call and its result renders and runs.
	args := api.NewToolCallFunctionArguments()
	args.Set("city", "Paris")
	stream := false
	_, last, _ := ollamaChat(t, c, &api.ChatRequest{Model: "tiny", Stream: &stream, Tools: api.Tools{ollamaWeatherTool()}, Options: ollamaGreedy(4),
		Messages: []api.Message{{Role: "user", Content: "Weather in Paris?"},
			{Role: "assistant", ToolCalls: []api.ToolCall{{Function: api.ToolCallFunction{Name: "get_weather", Arguments: args}}}},
			{Role: "tool", ToolName: "get_weather", Content: "sunny"}}})
	if last.PromptEvalCount < 20 {
		t.Errorf("the history's prompt is %d tokens", last.PromptEvalCount)
	}
}

func TestOllamaClientThinking(t *testing.T) {
	st := startStack(t, app.Options{ModelPath: model(t, "tiny", sharedVocab(t, "ggml-vocab-qwen3.gguf"))})
	c := ollamaClient(t, st)
	show, err := c.Show(context.Background(), &api.ShowRequest{Model: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCapability(show.Capabilities, "tools") || !hasCapability(show.Capabilities, "thinking") {
		t.Errorf("Qwen3's template: capabilities %v, want tools and thinking", show.Capabilities)
	}
	for _, think := range []bool{true, false} {
		stream := false
		_, last, _ := ollamaChat(t, c, &api.ChatRequest{Model: "tiny", Stream: &stream, Think: &api.ThinkValue{Value: think},
			Messages: []api.Message{{Role: "user", Content: "Why is the sky blue?"}}, Options: ollamaGreedy(24)})
		if strings.Contains(last.Message.Content, "<think>") {
			t.Errorf("think=%v: the reasoning marker leaked into content: %q", think, last.Message.Content)
		}
		if !think && last.Message.Thinking != "" {
			t.Errorf("think=false still thought: %q", last.Message.Thinking)
		}
	}
	// /api/generate refuses thinking, naming it.
	stream := false
	err = c.Generate(context.Background(), &api.GenerateRequest{Model: "tiny", Prompt: "x", Stream: &stream, Think: &api.ThinkValue{Value: true}},
		func(api.GenerateResponse) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "think") {
		t.Errorf("generate with think: %v, want a refusal naming think", err)
	}
}

func hasCapability[C ~string](caps []C, name string) bool {
	for _, c := range caps {
		if string(c) == name {
			return true
		}
	}
	return false
}
