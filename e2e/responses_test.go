package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"superfluid/app"
)

// OpenAI's Responses API through the official client (the dialect Codex
// CLI speaks), on the tiny synthetic model with Qwen2.5-Instruct's
// tokenizer and template. Random weights never call on their own:
// tool_choice "required" forces the call, and the grammar holds it to the
// tool's schema.

const respWeatherSchema = `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","days"],"additionalProperties":false}`

func respStack(t *testing.T, dataDir string) *app.Stack {
	return startStack(t, app.Options{ModelPath: model(t, "tiny", sharedVocab(t, "ggml-vocab-qwen2.5-instruct.gguf")), DataDir: dataDir})
}

// respParams asks for a forced call to get_weather (besides a web_search
// tool the server skips).
func respParams(t *testing.T, prompt string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:             "tiny",
		Input:             responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)},
		Instructions:      openai.String("You are a weather assistant."),
		Tools:             []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", schemaValue(t, respWeatherSchema), true), {OfWebSearch: &responses.WebSearchToolParam{Type: "web_search"}}},
		ToolChoice:        responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsRequired)},
		ParallelToolCalls: openai.Bool(false),
		MaxOutputTokens:   openai.Int(200),
		Temperature:       openai.Float(0),
	}
}

// onlyCall is the response's one function call, checked against the
// tool's schema.
func onlyCall(t *testing.T, r *responses.Response) responses.ResponseFunctionToolCall {
	t.Helper()
	var calls []responses.ResponseFunctionToolCall
	for _, it := range r.Output {
		if it.Type == "function_call" {
			calls = append(calls, it.AsFunctionCall())
		}
	}
	if r.Status != "completed" || len(calls) != 1 {
		t.Fatalf("status %q with %d calls, want completed with one: %s", r.Status, len(calls), r.RawJSON())
	}
	c := calls[0]
	if c.Name != "get_weather" || !strings.HasPrefix(c.CallID, "call_") || !strings.HasPrefix(c.ID, "fc_") || c.Status != "completed" {
		t.Fatalf("call %s", c.RawJSON())
	}
	checkValid(t, "arguments", validator(t, respWeatherSchema), c.Arguments)
	return c
}

// A forced call, then its output sent back through previous_response_id:
// the second prompt is the whole conversation, the output included, as
// /apply-template renders it.
func TestResponsesFunctionCallAcrossPreviousResponse(t *testing.T) {
	dir := t.TempDir()
	st := respStack(t, dir)
	client := openaiClient(st)
	ctx := context.Background()
	first, err := client.Responses.New(ctx, respParams(t, "Weather in Oslo?"))
	if err != nil {
		t.Fatal(err)
	}
	call := onlyCall(t, first)
	if first.Usage.InputTokens == 0 || first.Usage.OutputTokens == 0 || first.Usage.TotalTokens != first.Usage.InputTokens+first.Usage.OutputTokens {
		t.Errorf("usage %s", first.Usage.RawJSON())
	}
	if _, err := os.Stat(filepath.Join(dir, "responses", first.ID+".json")); err != nil {
		t.Errorf("the response is not stored under the data directory: %v", err)
	}

	const result = "sunny, 21 degrees, light wind from the west"
	out := responses.ResponseInputItemParamOfFunctionCallOutput(result)
	out.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	second, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "tiny",
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}},
		Tools:              []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", schemaValue(t, respWeatherSchema), true)},
		ToolChoice:         responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: openai.Opt(responses.ToolChoiceOptionsNone)},
		MaxOutputTokens:    openai.Int(4),
		Temperature:        openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if second.PreviousResponseID != first.ID || second.Status != "incomplete" || second.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("second response: %s", second.RawJSON())
	}
	// tool_choice "none" renders no tools; the instructions of the first
	// response are not carried over, as OpenAI documents.
	msgs := []map[string]any{
		{"role": "user", "content": "Weather in Oslo?"},
		{"role": "assistant", "content": "", "tool_calls": []map[string]any{{"id": call.CallID, "type": "function",
			"function": map[string]any{"name": call.Name, "arguments": call.Arguments}}}},
		{"role": "tool", "tool_call_id": call.CallID, "content": result},
	}
	want := renderedTokens(t, st, msgs)
	if int(second.Usage.InputTokens) != want {
		t.Fatalf("the second prompt is %d tokens; the conversation with the call's output renders to %d", second.Usage.InputTokens, want)
	}
	if without := renderedTokens(t, st, msgs[:2]); without >= want {
		t.Fatalf("rendering without the output is %d tokens, not fewer than %d", without, want)
	}

	// An unknown previous response is refused by name.
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "tiny", PreviousResponseID: openai.String("resp_nope"),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Param != "previous_response_id" {
		t.Fatalf("unknown previous_response_id: %v", err)
	}
}

// renderedTokens is how many tokens the chat messages render to, through
// /apply-template and /tokenize.
func renderedTokens(t *testing.T, st *app.Stack, msgs []map[string]any) int {
	t.Helper()
	var tmpl struct{ Prompt string }
	postJSON(t, st.URL()+"/apply-template", map[string]any{"messages": msgs}, &tmpl)
	var tok struct{ Tokens []int }
	postJSON(t, st.URL()+"/tokenize", map[string]any{"content": tmpl.Prompt, "add_special": true, "parse_special": true}, &tok)
	return len(tok.Tokens)
}

// postJSON posts body (see post), wants a 200 and decodes the answer into out.
func postJSON(t testing.TB, url string, body, out any) {
	t.Helper()
	status, raw := post(t, url, body)
	if status != http.StatusOK {
		t.Fatalf("%s: status %d", url, status)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
}

// The streamed events, put back together, are the final response: each
// item added, filled by its deltas and done, in order, numbered from 0.
// The stored response then answers GET until DELETE.
func TestResponsesStreamReassemblesAndIsStored(t *testing.T) {
	st := respStack(t, "")
	client := openaiClient(st)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		params func() responses.ResponseNewParams
		want   string // the terminal event
	}{
		{"call", func() responses.ResponseNewParams { return respParams(t, "Weather in Rome?") }, "response.completed"},
		{"text cut short", func() responses.ResponseNewParams {
			return responses.ResponseNewParams{Model: "tiny", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hi")},
				MaxOutputTokens: openai.Int(6), Temperature: openai.Float(0)}
		}, "response.incomplete"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream := client.Responses.NewStreaming(ctx, tc.params())
			defer stream.Close()
			type item struct {
				typ, text, args string
				done            bool
			}
			var (
				items []*item
				final *responses.Response
				types []string
			)
			for stream.Next() {
				ev := stream.Current()
				if int(ev.SequenceNumber) != len(types) {
					t.Fatalf("event %d (%s) has sequence_number %d", len(types), ev.Type, ev.SequenceNumber)
				}
				types = append(types, ev.Type)
				switch ev.Type {
				case "response.output_item.added":
					if int(ev.OutputIndex) != len(items) {
						t.Fatalf("item added at %d, have %d", ev.OutputIndex, len(items))
					}
					items = append(items, &item{typ: ev.Item.Type})
				case "response.output_text.delta", "response.reasoning_text.delta":
					items[ev.OutputIndex].text += ev.Delta
				case "response.function_call_arguments.delta":
					items[ev.OutputIndex].args += ev.Delta
				case "response.function_call_arguments.done":
					if ev.Arguments != items[ev.OutputIndex].args {
						t.Errorf("arguments.done %q after deltas %q", ev.Arguments, items[ev.OutputIndex].args)
					}
				case "response.output_item.done":
					items[ev.OutputIndex].done = true
				case "response.completed", "response.incomplete", "response.failed":
					r := ev.Response
					final = &r
				}
			}
			if err := stream.Err(); err != nil {
				t.Fatal(err)
			}
			if len(types) < 3 || types[0] != "response.created" || types[1] != "response.in_progress" || types[len(types)-1] != tc.want {
				t.Fatalf("events %v", types)
			}
			if final == nil || len(final.Output) != len(items) {
				t.Fatalf("final output has %d items, the stream %d", len(final.Output), len(items))
			}
			for i, it := range items {
				got := final.Output[i]
				if !it.done || got.Type != it.typ {
					t.Errorf("item %d: %s done %v, final %s", i, it.typ, it.done, got.Type)
				}
				switch it.typ {
				case "function_call":
					if args := got.AsFunctionCall().Arguments; args != it.args {
						t.Errorf("item %d: final arguments %q, streamed %q", i, args, it.args)
					}
				case "message":
					if text := got.AsMessage().Content[0].Text; text != it.text {
						t.Errorf("item %d: final text %q, streamed %q", i, text, it.text)
					}
				}
			}
			if tc.name == "call" {
				onlyCall(t, final)
			}

			stored, err := client.Responses.Get(ctx, final.ID, responses.ResponseGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			if stored.ID != final.ID || stored.Status != final.Status || len(stored.Output) != len(final.Output) {
				t.Fatalf("GET gave %s", stored.RawJSON())
			}
			if err := client.Responses.Delete(ctx, final.ID); err != nil {
				t.Fatal(err)
			}
			_, err = client.Responses.Get(ctx, final.ID, responses.ResponseGetParams{})
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
				t.Fatalf("GET after DELETE: %v", err)
			}
			if err := client.Responses.Delete(ctx, final.ID); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
				t.Fatalf("second DELETE: %v", err)
			}
		})
	}
}

// text.format's schema holds the answer to it; store: false keeps
// nothing; hostile or unhonoured fields get a 400 naming them.
func TestResponsesFormatStoreAndRefusals(t *testing.T) {
	st := respStack(t, "")
	client := openaiClient(st)
	ctx := context.Background()
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "tiny", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Forecast?")},
		MaxOutputTokens: openai.Int(200), Temperature: openai.Float(0), Store: openai.Bool(false),
		Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: "forecast", Schema: schemaValue(t, respWeatherSchema), Strict: openai.Bool(true)}}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != "completed" {
		t.Fatalf("status %q: %s", r.Status, r.RawJSON())
	}
	checkValid(t, "the structured answer", validator(t, respWeatherSchema), r.OutputText())
	var apiErr *openai.Error
	if _, err := client.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of a store: false response: %v", err)
	}
	for body, param := range map[string]string{
		`{"input": "hi", "background": true}`:           "background",
		`{"input": "hi", "truncation": "auto"}`:         "truncation",
		`{"input": "hi", "text": {"verbosity": "low"}}`: "text.verbosity",
		`{"input": 5}`:   "input",
		`{"input": [5]}`: "input",
		`{"input": [{"type": "function_call_output", "call_id": "c", "output": 5}]}`: "input",
		`{"input": [{"type": "input_image"}]}`:                                       "input",
		`{"input": "hi", "tools": [{"type": "function", "name": "a b"}]}`:            "tools",
		`{"input": "hi", "tool_choice": "required"}`:                                 "tool_choice",
		`{"input": "hi", "tool_choice": {"type": "web_search_preview"}}`:             "tool_choice",
		`{"input": "hi", "text": {"format": {"type": "json_schema", "name": "x"}}}`:  "text.format.schema",
		`{"input": "hi", "reasoning": {"effort": "max"}}`:                            "reasoning.effort",
		`{"input": "hi", "instructions": ["x"]}`:                                     "instructions",
		`{"input": "hi", "metadata": 5}`:                                             "metadata",
		`{"input": "hi", "max_output_tokens": -5}`:                                   "max_output_tokens",
	} {
		resp, err := http.Post(st.URL()+"/v1/responses", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Param *string }
		}
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != param {
			got := "<none>"
			if e.Error.Param != nil {
				got = *e.Error.Param
			}
			t.Errorf("%s: status %d param %s, want 400 naming %s", body, resp.StatusCode, got, param)
		}
	}
}
