package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"superfluid/app"
)

// Reasoning first, then the answer: on a model whose chat template has a
// reasoning block (the tiny synthetic model with Qwen3's tokenizer and
// template), a schema constrains only what follows </think>, so a thinking
// model still thinks. Random weights almost never close the block on their
// own; a bias on </think> makes the model close it at once, and the answer
// after it must then follow the schema.
func TestStructuredOutputAfterReasoning(t *testing.T) {
	path := model(t, "tiny", sharedVocab(t, "ggml-vocab-qwen3.gguf"))
	st := startStack(t, app.Options{ModelPath: path})
	client := openaiClient(st)
	v := validator(t, thingSchema)
	end := tokenID(t, st, "</think>")

	// The block closed at once: "</think>", whitespace, then the answer.
	params := greedyChat("Describe a thing.", structuredBudget)
	params.ResponseFormat = jsonSchemaFormat(t, thingSchema)
	params.LogitBias = map[string]int64{fmt.Sprint(end): 100}
	resp, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	// The reply is read as a turn: the closed block is no content, and
	// what follows it is the answer.
	text := resp.Choices[0].Message.Content
	if strings.Contains(text, "</think>") || resp.Choices[0].Message.JSON.ExtraFields["reasoning_content"].Raw() != "" {
		t.Errorf("the empty reasoning block should vanish from the reply: %s", resp.Choices[0].Message.RawJSON())
	}
	checkValid(t, "the answer after </think>", v, text)
	if resp.Choices[0].FinishReason != "stop" {
		t.Errorf("finish_reason %q, want stop", resp.Choices[0].FinishReason)
	}
	acc := streamChat(t, client, params)
	if acc.Choices[0].Message.Content != text {
		t.Errorf("the stream %q differs from the whole reply %q (greedy)", acc.Choices[0].Message.Content, text)
	}

	// Left alone, the model reasons freely: the schema has not started, so
	// the reply is not held to JSON (with the grammar applied from the
	// first token it would have to start with "{").
	params = greedyChat("Describe a thing.", 24)
	params.ResponseFormat = jsonSchemaFormat(t, thingSchema)
	resp, err = client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	free := resp.Choices[0].Message.Content
	t.Logf("free reasoning: %q", free)
	if strings.HasPrefix(strings.TrimSpace(free), "{") || json.Valid([]byte(free)) {
		t.Errorf("reply %q looks constrained from the first token; the reasoning should be free", free)
	}
	if strings.Contains(free, "</think>") {
		t.Skipf("the random model closed its reasoning by itself (%q): the free-reasoning check proves nothing", free)
	}
	// The same free reasoning as without any schema: the lazy grammar
	// changes nothing before its trigger.
	plain, err := client.Chat.Completions.New(context.Background(), greedyChat("Describe a thing.", 24))
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.Choices[0].Message.Content; got != free {
		t.Errorf("reasoning under a schema %q differs from the unconstrained reply %q", free, got)
	}
}
