package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"superfluid/app"
)

// Structured output on the real server with the tiny synthetic model,
// through the official clients and raw llama.cpp bodies: every output
// parses and validates against its schema, checked by an independent
// validator (santhosh-tekuri/jsonschema, formats asserted). Random weights
// would never close a free string, so every string and number the schemas
// allow is bounded and most values are enums: the grammar, not the model,
// brings each output to its end.

// thingSchema bounds every value: enums, small integer ranges, short
// strings, a date, a short array, a nullable.
const thingSchema = `{
  "type": "object",
  "properties": {
    "color": {"enum": ["red", "green", "blue"]},
    "size": {"type": "integer", "minimum": 1, "maximum": 12},
    "tag": {"type": "string", "minLength": 1, "maxLength": 6},
    "ok": {"type": "boolean"},
    "when": {"type": "string", "format": "date"},
    "parts": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
    "note": {"anyOf": [{"type": "null"}, {"type": "integer", "minimum": -5, "maximum": 5}]}
  },
  "required": ["color", "size", "tag", "ok", "when", "parts", "note"],
  "additionalProperties": false
}`

// pairsSchema is an array at the root, of objects with a const and a
// range, and a $ref.
const pairsSchema = `{
  "$defs": {"pair": {"type": "object", "properties": {"k": {"const": "x"}, "v": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["k", "v"], "additionalProperties": false}},
  "type": "array", "items": {"$ref": "#/$defs/pair"}, "minItems": 1, "maxItems": 2
}`

// structuredBudget is enough tokens for any text of the schemas above,
// with the most whitespace their grammars allow between tokens.
const structuredBudget = 900

var structuredPrompts = []string{"Describe a thing.", "Another one, please.", "qwerty 12345 {}"}

// validator compiles schema with format assertion on.
func validator(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkValid fails unless text is one JSON value that s accepts.
func checkValid(t *testing.T, what string, s *jsonschema.Schema, text string) {
	t.Helper()
	t.Logf("%s: %q", what, text)
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		t.Errorf("%s: the output is not JSON (%v): %q", what, err, text)
		return
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s: the output does not validate: %v\n%s", what, err, text)
	}
}

// schemaValue is schema as a Go value, for the clients that take one.
func schemaValue(t *testing.T, schema string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(schema), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func jsonSchemaFormat(t *testing.T, schema string) openai.ChatCompletionNewParamsResponseFormatUnion {
	return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
		JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "thing", Schema: schemaValue(t, schema), Strict: openai.Bool(true)},
	}}
}

var structuredSchemas = []struct{ name, schema string }{{"thing", thingSchema}, {"pairs", pairsSchema}}

func TestStructuredOpenAIClient(t *testing.T) {
	st := startStack(t, app.Options{})
	client := openaiClient(st)
	for _, sc := range structuredSchemas {
		v := validator(t, sc.schema)
		for i, prompt := range structuredPrompts {
			params := greedyChat(prompt, structuredBudget)
			params.ResponseFormat = jsonSchemaFormat(t, sc.schema)
			if i == 2 {
				params.Temperature = openai.Float(0.9)
				params.Seed = openai.Int(int64(7 + i))
			}
			resp, err := client.Chat.Completions.New(context.Background(), params)
			if err != nil {
				t.Fatalf("%s: %v", sc.name, err)
			}
			what := fmt.Sprintf("chat %s %q", sc.name, prompt)
			if got := resp.Choices[0].FinishReason; got != "stop" {
				t.Errorf("%s: finish_reason %q, want stop (the grammar completes)", what, got)
			}
			checkValid(t, what, v, resp.Choices[0].Message.Content)

			acc := streamChat(t, client, params)
			checkValid(t, what+" streamed", v, acc.Choices[0].Message.Content)
			if i < 2 && acc.Choices[0].Message.Content != resp.Choices[0].Message.Content {
				t.Errorf("%s: the stream %q differs from the whole reply %q (greedy)", what, acc.Choices[0].Message.Content, resp.Choices[0].Message.Content)
			}
		}
	}
	// The legacy completions endpoint takes response_format too (llama.cpp's
	// extension; the client sends it as an extra field), with n choices.
	v := validator(t, thingSchema)
	rf := map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "thing", "schema": schemaValue(t, thingSchema), "strict": true}}
	cmpl, err := client.Completions.New(context.Background(), openai.CompletionNewParams{
		Model: openai.CompletionNewParamsModel("tiny"), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("A thing:")},
		MaxTokens: openai.Int(structuredBudget), Temperature: openai.Float(1), Seed: openai.Int(3), N: openai.Int(2),
	}, option.WithJSONSet("response_format", rf))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cmpl.Choices {
		checkValid(t, fmt.Sprintf("completion choice %d", i), v, c.Text)
	}
	// Every token above was sampled under a grammar, one path or the other.
	m := scrapeMetrics(t, st.URL())
	if m["superfluid_grammar_fast_tokens_total"]+m["superfluid_grammar_masked_tokens_total"] == 0 {
		t.Errorf("/metrics counts no grammar-constrained tokens: %v fast, %v masked",
			m["superfluid_grammar_fast_tokens_total"], m["superfluid_grammar_masked_tokens_total"])
	}
}

// json_object: any JSON object. Free strings never close on random
// weights, so the test makes "{" and "}" the model's favourites: the
// grammar must take "{" first and may end the object at once.
func TestStructuredJSONObject(t *testing.T) {
	st := startStack(t, app.Options{})
	client := openaiClient(st)
	bias := map[string]int64{}
	for _, s := range []string{"{", "}"} {
		bias[fmt.Sprint(tokenID(t, st, s))] = 100
	}
	params := greedyChat("Any object.", 64)
	params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	params.LogitBias = bias
	resp, err := client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if text := resp.Choices[0].Message.Content; json.Unmarshal([]byte(text), &obj) != nil || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("json_object: %q (finish %s), want a JSON object, complete", text, resp.Choices[0].FinishReason)
	}
	// Without the bias the output runs to the limit inside some string; all
	// of it must still be the start of a JSON object.
	params = greedyChat("Any object.", 48)
	params.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
	resp, err = client.Chat.Completions.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	checkObjectPrefix(t, "json_object", resp.Choices[0].Message.Content, resp.Choices[0].FinishReason)
}

// checkObjectPrefix fails unless text is a JSON object, or (cut at the
// limit) the start of one.
func checkObjectPrefix(t *testing.T, what, text, finish string) {
	t.Helper()
	if !strings.HasPrefix(text, "{") {
		t.Errorf("%s: %q does not start a JSON object", what, text)
		return
	}
	dec := json.NewDecoder(strings.NewReader(text))
	for {
		_, err := dec.Token()
		if err == nil {
			continue
		}
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			t.Errorf("%s: %q is not the start of JSON: %v", what, text, err)
		case err == io.EOF && finish != "stop" && finish != "length":
			t.Errorf("%s: finish %q", what, finish)
		case err != io.EOF && finish == "stop":
			t.Errorf("%s: finished (stop) inside the object: %q: %v", what, text, err)
		}
		return
	}
}

// tokenID is the one token the model's vocabulary spells s with.
func tokenID(t *testing.T, st *app.Stack, s string) int {
	t.Helper()
	var out struct{ Tokens []int }
	postJSONTo(t, st, "/tokenize", map[string]any{"content": s}, 200, &out)
	if len(out.Tokens) != 1 {
		t.Fatalf("%q is %d tokens: %v", s, len(out.Tokens), out.Tokens)
	}
	return out.Tokens[0]
}

// postJSONTo posts body and decodes the answer into out, failing on any
// other status than want.
func postJSONTo(t testing.TB, st *app.Stack, path string, body any, want int, out any) []byte {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(st.URL()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s: status %d %s, want %d", path, resp.StatusCode, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: %v: %s", path, err, raw)
		}
	}
	return raw
}

// Raw llama.cpp bodies: json_schema and grammar on /completion, /infill
// and /v1/chat/completions, whole and streamed.
func TestStructuredLlamaCppBodies(t *testing.T) {
	st := startStack(t, app.Options{})
	v := validator(t, thingSchema)
	schema := schemaValue(t, thingSchema)
	for _, c := range []struct {
		path string
		body map[string]any
	}{
		{"/completion", map[string]any{"prompt": "A thing:", "json_schema": schema}},
		{"/completion", map[string]any{"prompt": "A thing, sampled:", "json_schema": schema, "temperature": 0.8, "seed": 5}},
		{"/infill", map[string]any{"input_prefix": "thing = ", "input_suffix": "\n", "json_schema": schema}},
	} {
		c.body["n_predict"], c.body["temperature"] = structuredBudget, orDefault(c.body["temperature"], 0)
		var res struct {
			Content  string `json:"content"`
			StopType string `json:"stop_type"`
		}
		postJSONTo(t, st, c.path, c.body, 200, &res)
		checkValid(t, c.path, v, res.Content)
		if res.StopType != "eos" {
			t.Errorf("%s: stop_type %q, want eos (the grammar completes)", c.path, res.StopType)
		}
		c.body["stream"] = true
		checkValid(t, c.path+" streamed", v, llamaStreamText(t, st, c.path, c.body))
	}
	// A GBNF grammar, as llama.cpp's clients write them.
	gbnf := "root ::= \"answer: \" (\"yes\" | \"no\") \" (\" [0-9] [0-9]? \")\"\n"
	for _, path := range []string{"/completion", "/v1/chat/completions"} {
		body := map[string]any{"grammar": gbnf, "temperature": 0, "n_predict": 64, "max_tokens": 64}
		if path == "/completion" {
			body["prompt"] = "Is it?"
		} else {
			body["messages"] = []map[string]string{{"role": "user", "content": "Is it?"}}
		}
		raw := postJSONTo(t, st, path, body, 200, nil)
		var text string
		var res struct {
			Content string `json:"content"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			t.Fatal(err)
		}
		text = res.Content
		if len(res.Choices) > 0 {
			text = res.Choices[0].Message.Content
		}
		var yn string
		var n int
		if _, err := fmt.Sscanf(text, "answer: %s (%d)", &yn, &n); err != nil || (yn != "yes" && yn != "no") || !strings.HasSuffix(text, ")") {
			t.Errorf("%s: %q does not follow the grammar", path, text)
		}
	}
}

func orDefault(v any, d any) any {
	if v == nil {
		return d
	}
	return v
}

// llamaStreamText posts a streamed llama.cpp request and joins the
// content of its events.
func llamaStreamText(t *testing.T, st *app.Stack, path string, body map[string]any) string {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(st.URL()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s stream: %d %s", path, resp.StatusCode, raw)
	}
	var text strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct{ Content string }
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("%s stream event %q: %v", path, data, err)
		}
		text.WriteString(ev.Content)
	}
	return text.String()
}

func TestStructuredOllamaClient(t *testing.T) {
	st := startStack(t, app.Options{})
	c := ollamaClient(t, st)
	for _, sc := range structuredSchemas {
		v := validator(t, sc.schema)
		for _, stream := range []bool{false, true} {
			what := fmt.Sprintf("%s stream=%v", sc.name, stream)
			text, last, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: "A thing:", Format: json.RawMessage(sc.schema),
				Stream: &stream, Options: ollamaGreedy(structuredBudget)})
			checkValid(t, "generate "+what, v, text)
			if last.DoneReason != "stop" {
				t.Errorf("generate %s: done_reason %q, want stop", what, last.DoneReason)
			}
			text, _, _ = ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: "<|im_start|>user\nthing<|im_end|>\n", Raw: true,
				Format: json.RawMessage(sc.schema), Stream: &stream, Options: ollamaGreedy(structuredBudget)})
			checkValid(t, "raw generate "+what, v, text)
			text, _, _ = ollamaChat(t, c, &api.ChatRequest{Model: "tiny", Messages: []api.Message{{Role: "user", Content: "Describe a thing."}},
				Format: json.RawMessage(sc.schema), Stream: &stream, Options: map[string]any{"temperature": 0.7, "seed": 9, "num_predict": structuredBudget}})
			checkValid(t, "chat "+what, v, text)
		}
	}
	// "json": any object; cut at the limit it must still be the start of one.
	stream := false
	text, last, _ := ollamaGenerate(t, c, &api.GenerateRequest{Model: "tiny", Prompt: "Any object:", Format: json.RawMessage(`"json"`), Stream: &stream, Options: ollamaGreedy(48)})
	checkObjectPrefix(t, `format "json"`, text, last.DoneReason)
}

func TestStructuredAnthropicSDK(t *testing.T) {
	st := startStack(t, app.Options{})
	c := anthropicClient(st)
	for _, sc := range structuredSchemas {
		v := validator(t, sc.schema)
		params := anthropicGreedy(structuredBudget, anthropic.NewUserMessage(anthropic.NewTextBlock("Describe a thing.")))
		params.OutputConfig = anthropic.OutputConfigParam{Format: anthropic.JSONOutputFormatParam{Schema: schemaValue(t, sc.schema)}}
		msg, err := c.Messages.New(context.Background(), params)
		if err != nil {
			t.Fatalf("%s: %v", sc.name, err)
		}
		checkValid(t, "messages "+sc.name, v, messageText(msg))
		if msg.StopReason != "end_turn" {
			t.Errorf("messages %s: stop_reason %q, want end_turn", sc.name, msg.StopReason)
		}
		streamed, _ := anthropicStream(t, c, params)
		checkValid(t, "messages streamed "+sc.name, v, messageText(&streamed))
		if messageText(&streamed) != messageText(msg) {
			t.Errorf("%s: the stream %q differs from the whole reply %q (greedy)", sc.name, messageText(&streamed), messageText(msg))
		}
		// The beta's output_format, as a raw field.
		beta, err := c.Messages.New(context.Background(), anthropicGreedy(structuredBudget, anthropic.NewUserMessage(anthropic.NewTextBlock("Another."))),
			aoption.WithJSONSet("output_format", map[string]any{"type": "json_schema", "schema": schemaValue(t, sc.schema)}))
		if err != nil {
			t.Fatalf("output_format %s: %v", sc.name, err)
		}
		checkValid(t, "output_format "+sc.name, v, messageText(beta))
	}
}
