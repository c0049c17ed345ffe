package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"superfluid/app"
	sfhttp "superfluid/http"
)

// Bad input, route by route: every route the server answers (its own
// Routes(), so a new route cannot be forgotten) gets the generic cases its
// request allows — malformed JSON, wrong types, missing fields, an unknown
// model, invalid UTF-8, a prompt past the context, negative and absurd
// limits, sampling out of range, a body over --max-body, the wrong method —
// and each answer must carry a 4xx status and the API's own error shape.
// The server must then still serve.

// badRoute says how to build a request a route accepts and which of its
// fields the generic cases may break. Field names are dotted paths into the
// JSON body ("options.temperature", "messages.0.content"); "" means the
// route has no such field and the case is skipped.
type badRoute struct {
	// body builds a request that succeeds, with prompt as its text; nil
	// for a route that takes no body.
	body        func(prompt string) map[string]any
	prompt      string   // where the prompt text is (invalid UTF-8 goes there)
	ctxBound    bool     // a prompt past the context is refused
	model       string   // the model name field
	limit       string   // the generation limit field
	temperature string   // the temperature field
	topP        string   // the top_p field
	required    []string // fields the route cannot do without
	wrongTypes  map[string]any
	extra       []badCase
	// embedding: an embedding route, whose cases run on an embedding
	// model's stack (TestBadInputEmbeddingTable); the generation model's
	// stack only checks that it refuses the route.
	embedding bool
}

// badCase is one bad request and what must come back.
type badCase struct {
	name   string
	edit   func(body map[string]any) // changes the route's good body
	status int
	check  func(e apiErrorBody) string // "" when the error is right
}

// Good bodies, one per kind of request: each asks for a few greedy tokens.

func chatBody(prompt string) map[string]any {
	return map[string]any{"model": "tiny", "messages": []any{map[string]any{"role": "user", "content": prompt}}, "max_tokens": 4, "temperature": 0}
}

func responsesBody(prompt string) map[string]any {
	return map[string]any{"model": "tiny", "input": prompt, "max_output_tokens": 4, "temperature": 0}
}

// respImageInput is a Responses input of one user message holding an
// input_image of url.
func respImageInput(url string) []any {
	return []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_image", "image_url": url}}}}
}

func completionsBody(prompt string) map[string]any {
	return map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": 4, "temperature": 0}
}

func llamaCompletionBody(prompt string) map[string]any {
	return map[string]any{"prompt": prompt, "n_predict": 4, "temperature": 0}
}

func llamaInfillBody(prompt string) map[string]any {
	return map[string]any{"input_prefix": prompt, "input_suffix": "\n    return x\n", "n_predict": 4, "temperature": 0}
}

func ollamaGenerateBody(prompt string) map[string]any {
	return map[string]any{"model": "tiny", "prompt": prompt, "stream": false, "options": map[string]any{"num_predict": 4, "temperature": 0}}
}

func ollamaChatBody(prompt string) map[string]any {
	return map[string]any{"model": "tiny", "messages": []any{map[string]any{"role": "user", "content": prompt}}, "stream": false,
		"options": map[string]any{"num_predict": 4, "temperature": 0}}
}

func anthropicBody(prompt string) map[string]any {
	return map[string]any{"model": "tiny", "max_tokens": 4, "messages": []any{map[string]any{"role": "user", "content": prompt}}, "temperature": 0}
}

// badInputRoutes has one entry per route: a new route is one line here
// (TestBadInputCoversEveryRoute fails until it has one).
var badInputRoutes = map[string]badRoute{
	// Routes without a body: only the method can be wrong.
	"/health": {}, "/metrics": {}, "/v1/models": {},
	"/": {}, "/api/version": {}, "/api/tags": {}, "/api/ps": {},

	"/props": {}, "/slots": {},
	"/v1/status": {}, "/v1/status/events": {},

	// The web page's files: a name, no body (web/web_test.go covers
	// unknown and hostile names).
	"/ui/{id}": {},

	// Ollama's pull and delete need a models directory and a source to
	// pull from: ollama_pull_test.go covers their bad input.
	"/api/pull": {}, "/api/delete": {},

	// The batch API: its bodies are a multipart upload or refer to
	// uploaded files, so batches_test.go covers its bad input.
	"/v1/files": {}, "/v1/files/{id}": {}, "/v1/files/{id}/content": {},
	"/v1/batches": {}, "/v1/batches/{id}": {}, "/v1/batches/{id}/cancel": {},

	// Reranking needs a reranker (a generation model refuses it) and
	// /lora-adapters a model with adapters whose POST body is an array:
	// rerank_test.go and lora_test.go cover their bad input.
	"/rerank": {}, "/reranking": {}, "/v1/rerank": {}, "/v1/reranking": {},
	"/lora-adapters": {},
	// Transcriptions take multipart forms, not JSON: transcribe_test.go
	// holds their bad input (TestTranscriptionRefusals).
	"/v1/audio/transcriptions": {}, "/audio/transcriptions": {},

	"/v1/completions": {
		body: completionsBody, prompt: "prompt", ctxBound: true, model: "model", limit: "max_tokens",
		temperature: "temperature", topP: "top_p", required: []string{"prompt"},
		wrongTypes: map[string]any{"max_tokens": "ten", "prompt": map[string]any{}, "temperature": "hot", "stop": 5, "logprobs": "yes", "suffix": 5},
		extra: []badCase{
			{name: "n 1000", edit: set("n", 1000), status: 400, check: openaiParam("n")},
			{name: "logprobs 21", edit: set("logprobs", 21), status: 400, check: openaiParam("logprobs")},
			{name: "best_of above n", edit: set("best_of", 2), status: 400, check: openaiParam("best_of")},
			{name: "echo with logprobs", edit: edits(set("echo", true), set("logprobs", 1)), status: 400, check: openaiParam("echo")},
			{name: "suffix with token ids", edit: edits(set("prompt", []any{1, 2}), set("suffix", "x")), status: 400, check: openaiParam("suffix")},
			{name: "prompt object with images", edit: set("prompt", map[string]any{"prompt_string": "a <__media__>", "multimodal_data": []any{"aGk="}}), status: 400, check: openaiParam("prompt.multimodal_data")},
		},
	},
	// llama.cpp samples greedily at any temperature <= 0, so a negative
	// one is not an error there.
	"/completion": {
		body: llamaCompletionBody, prompt: "prompt", ctxBound: true, model: "model", limit: "n_predict", topP: "top_p", required: []string{"prompt"},
		wrongTypes: map[string]any{"n_predict": "ten", "prompt": map[string]any{}, "stop": 5, "stream": "yes", "logit_bias": "x", "samplers": 5, "response_fields": "content"},
		extra: []badCase{
			{name: "n_probs 21", edit: set("n_probs", 21), status: 400},
			{name: "token id outside the vocabulary", edit: set("prompt", []any{99999999}), status: 400},
			{name: "logit_bias 500", edit: set("logit_bias", []any{[]any{1, 500}}), status: 400},
			{name: "temperature -1 is greedy", edit: set("temperature", -1), status: 200},
		},
	},
	"/infill": {
		body: llamaInfillBody, prompt: "input_prefix", model: "model", limit: "n_predict", topP: "top_p",
		wrongTypes: map[string]any{"n_predict": "ten", "input_prefix": 5, "input_extra": "x", "prompt": []any{1}, "n_indent": "four"},
		extra: []badCase{
			{name: "input_extra without text", edit: set("input_extra", []any{map[string]any{"filename": "a.go"}}), status: 400},
			// llama.cpp trims the context of an infill to fit; it never refuses it.
			{name: "prefix past the context is trimmed", edit: set("input_prefix", longPrompt), status: 200},
		},
	},
	"/tokenize": {
		body:   func(p string) map[string]any { return map[string]any{"content": p} },
		prompt: "content", required: []string{"content"}, wrongTypes: map[string]any{"content": 5, "with_pieces": "yes"},
	},
	"/detokenize": {
		body:       func(string) map[string]any { return map[string]any{"tokens": []int{104, 105}} },
		wrongTypes: map[string]any{"tokens": "hi"},
		extra: []badCase{
			{name: "token outside the vocabulary", edit: set("tokens", []int{104, 1 << 30}), status: 400},
			{name: "negative token", edit: set("tokens", []int{-1}), status: 400},
		},
	},

	// Renders, never generates: no limit, sampling or context to break.
	"/apply-template": {
		body: func(p string) map[string]any {
			return map[string]any{"messages": []any{map[string]any{"role": "user", "content": p}}}
		},
		prompt: "messages.0.content", model: "model", required: []string{"messages"},
		wrongTypes: map[string]any{"messages": map[string]any{}, "tools": "all", "add_generation_prompt": "yes", "chat_template_kwargs": 5},
		extra: []badCase{
			{name: "unknown role", edit: set("messages.0.role", "wizard"), status: 400},
			{name: "arguments not a JSON object", edit: set("messages", []any{map[string]any{"role": "user", "content": "x"},
				map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "arguments": "[1]"}}}}}), status: 400},
		},
	},
	"/api/show": {
		body: func(string) map[string]any { return map[string]any{"model": "tiny"} }, model: "model",
		wrongTypes: map[string]any{"model": 5},
	},
	// Ollama bounds num_predict by the context whatever it says (negative
	// is "unbounded"), so its limit has no bad values to send.
	"/api/generate": {
		body: ollamaGenerateBody, prompt: "prompt", model: "model",
		temperature: "options.temperature", topP: "options.top_p", required: []string{"model"},
		wrongTypes: map[string]any{"prompt": 5, "options": "fast", "options.num_predict": "ten", "stream": "yes"},
	},
	"/api/chat": {
		body: ollamaChatBody, prompt: "messages.0.content", model: "model",
		temperature: "options.temperature", topP: "options.top_p", required: []string{"model"},
		wrongTypes: map[string]any{"messages": map[string]any{}, "options.temperature": "hot"},
	},
	"/v1/messages": {
		body: anthropicBody, prompt: "messages.0.content", ctxBound: true, model: "model", limit: "max_tokens",
		temperature: "temperature", topP: "top_p", required: []string{"max_tokens", "messages"},
		wrongTypes: map[string]any{"max_tokens": "ten", "messages": map[string]any{}, "system": 5},
		extra: []badCase{
			{name: "temperature 1.5", edit: set("temperature", 1.5), status: 400}, // Anthropic's range is [0, 1]
			{name: "unknown role", edit: set("messages.0.role", "wizard"), status: 400},
		},
	},
	"/v1/messages/count_tokens": {
		body: func(p string) map[string]any {
			return map[string]any{"model": "tiny", "messages": []any{map[string]any{"role": "user", "content": p}}}
		},
		prompt: "messages.0.content", model: "model", required: []string{"messages"},
		wrongTypes: map[string]any{"messages": map[string]any{}},
	},
	"/v1/responses/{id}": {},
	// The Conversations API: the routes on an id are covered by
	// conversations_test.go and http/openai/conversations.
	"/v1/conversations": {
		body: func(p string) map[string]any {
			return map[string]any{"items": []any{map[string]any{"role": "user", "content": p}}, "metadata": map[string]any{"k": "v"}}
		},
		prompt: "items.0.content", wrongTypes: map[string]any{"items": "x", "metadata": 5},
		extra: []badCase{
			{name: "21 items", edit: set("items", strings.Split(strings.Repeat("a,", 20)+"a", ",")), status: 400, check: openaiParam("items")},
			{name: "unknown role", edit: set("items.0.role", "wizard"), status: 400, check: openaiParam("items")},
			{name: "unknown field", edit: set("store", true), status: 400, check: openaiParam("store")},
			{name: "17 metadata keys", edit: set("metadata", map[string]any{"a": "", "b": "", "c": "", "d": "", "e": "", "f": "", "g": "", "h": "", "i": "", "j": "", "k": "", "l": "", "m": "", "n": "", "o": "", "p": "", "q": ""}), status: 400, check: openaiParam("metadata")},
		},
	},
	"/v1/conversations/{id}": {}, "/v1/conversations/{id}/items": {}, "/v1/conversations/{id}/items/{id}": {},
	"/v1/conversations/{id}/fork": {}, "/v1/conversations/{id}/trim": {},
	"/v1/embeddings": {
		embedding: true, body: func(p string) map[string]any { return map[string]any{"model": "tiny", "input": p} },
		prompt: "input", ctxBound: true, model: "model", required: []string{"input"},
		wrongTypes: map[string]any{"input": map[string]any{}, "dimensions": "ten", "encoding_format": 5, "user": 5},
		extra: []badCase{
			{name: "dimensions 0", edit: set("dimensions", 0), status: 400, check: openaiParam("dimensions")},
			{name: "dimensions past the model", edit: set("dimensions", 100000), status: 400, check: openaiParam("dimensions")},
			{name: "encoding_format hex", edit: set("encoding_format", "hex"), status: 400, check: openaiParam("encoding_format")},
			{name: "token id outside the vocabulary", edit: set("input", []any{99999999}), status: 400, check: openaiParam("input")},
			{name: "nested wrong types", edit: set("input", []any{[]any{1, "x"}}), status: 400, check: openaiParam("input")},
			{name: "3000 inputs", edit: set("input", strings.Split(strings.Repeat("a,", 2999)+"a", ",")), status: 400, check: openaiParam("input")},
			{name: "empty string", edit: set("input", ""), status: 400, check: openaiParam("input")},
		},
	},
	"/api/embed": {
		embedding: true, body: func(p string) map[string]any { return map[string]any{"model": "tiny", "input": p} },
		prompt: "input", model: "model", required: []string{"model"},
		wrongTypes: map[string]any{"input": 5, "truncate": "yes", "dimensions": "ten", "options": "fast", "options.num_ctx": "ten"},
		extra: []badCase{
			{name: "dimensions -1", edit: set("dimensions", -1), status: 400},
			{name: "keep_alive forever", edit: set("keep_alive", "forever"), status: 400},
			{name: "past the context, truncate false", edit: edits(set("input", longPrompt), set("truncate", false)), status: 400},
			{name: "past the context is truncated", edit: set("input", longPrompt), status: 200},
		},
	},
	"/api/embeddings": {
		embedding: true, body: func(p string) map[string]any { return map[string]any{"model": "tiny", "prompt": p} },
		prompt: "prompt", ctxBound: true, model: "model", required: []string{"model"},
		wrongTypes: map[string]any{"prompt": 5, "options": "fast"},
	},
	"/embedding":  llamaEmbedRoute,
	"/embeddings": llamaEmbedRoute,
	"/v1/responses": {
		body: responsesBody, prompt: "input", ctxBound: true, model: "model", limit: "max_output_tokens",
		temperature: "temperature", topP: "top_p", required: []string{"input"},
		wrongTypes: map[string]any{"max_output_tokens": "ten", "input": 5, "temperature": "hot", "store": "yes"},
		extra: []badCase{
			{name: "tool without a name", edit: set("tools", []any{map[string]any{"type": "function"}}), status: 400, check: openaiParam("tools")},
			{name: "required without tools", edit: set("tool_choice", "required"), status: 400, check: openaiParam("tool_choice")},
			{name: "unknown previous response", edit: set("previous_response_id", "resp_nope"), status: 400, check: openaiParam("previous_response_id")},
			{name: "reasoning effort", edit: set("reasoning", map[string]any{"effort": "huge"}), status: 400, check: openaiParam("reasoning.effort")},
			{name: "image by ftp", edit: set("input", respImageInput("ftp://example.com/a.png")), status: 400, check: openaiParam("input")},
			{name: "remote image without the flag", edit: set("input", respImageInput("https://example.com/a.png")), status: 400, check: openaiParam("input")},
			{name: "image on a model without a projector", edit: set("input", respImageInput("data:image/png;base64,aGk=")), status: 400, check: openaiParam("input")},
			{name: "image detail", edit: set("input", []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "input_image", "image_url": "data:,", "detail": "ultra"}}}}), status: 400, check: openaiParam("input")},
		},
	},
	"/v1/chat/completions": {
		body: chatBody, prompt: "messages.0.content", ctxBound: true, model: "model", limit: "max_tokens",
		temperature: "temperature", topP: "top_p", required: []string{"messages"},
		wrongTypes: map[string]any{"max_tokens": "ten", "messages": map[string]any{}, "temperature": "hot", "stop": 5},
		extra: []badCase{
			{name: "n 1000", edit: set("n", 1000), status: 400, check: openaiParam("n")},
			{name: "max_completion_tokens -5", edit: set("max_completion_tokens", -5), status: 400, check: openaiParam("max_completion_tokens")},
			{name: "unknown role", edit: set("messages.0.role", "wizard"), status: 400, check: openaiParam("messages")},
			{name: "top_logprobs without logprobs", edit: set("top_logprobs", 3), status: 400, check: openaiParam("top_logprobs")},
			{name: "top_logprobs 21", edit: edits(set("logprobs", true), set("top_logprobs", 21)), status: 400, check: openaiParam("top_logprobs")},
			{name: "logit_bias not a token", edit: set("logit_bias", map[string]any{"word": 1}), status: 400, check: openaiParam("logit_bias")},
			{name: "17 stop strings", edit: set("stop", strings.Split("a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", ",")), status: 400, check: openaiParam("stop")},
			{name: "image content", edit: set("messages.0.content", []any{map[string]any{"type": "image_url"}}), status: 400, check: openaiParam("messages")},
			{name: "remote image without the flag", edit: set("messages.0.content", []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/a.png"}}}), status: 400, check: openaiParam("messages")},
			{name: "image by file URL", edit: set("messages.0.content", []any{map[string]any{"type": "image_url", "image_url": map[string]any{"url": "file:///etc/passwd"}}}), status: 400, check: openaiParam("messages")},
			{name: "tool name with a space", edit: set("tools", []any{map[string]any{"type": "function", "function": map[string]any{"name": "a b"}}}), status: 400, check: openaiParam("tools")},
			{name: "tool_choice names no tool", edit: set("tool_choice", map[string]any{"type": "function", "function": map[string]any{"name": "f"}}), status: 400, check: openaiParam("tool_choice")},
			{name: "reasoning_effort", edit: set("reasoning_effort", "huge"), status: 400, check: openaiParam("reasoning_effort")},
		},
	},
}

// llamaEmbedRoute is llama.cpp's /embedding and /embeddings.
var llamaEmbedRoute = badRoute{
	embedding: true, body: func(p string) map[string]any { return map[string]any{"content": p} },
	prompt: "content", ctxBound: true, required: []string{"content"},
	wrongTypes: map[string]any{"content": map[string]any{}, "embd_normalize": "two"},
	extra: []badCase{
		{name: "embd_normalize -5", edit: set("embd_normalize", -5), status: 400},
		{name: "token id outside the vocabulary", edit: set("content", []any{99999999}), status: 400},
		{name: "encoding_format base64", edit: set("encoding_format", "base64"), status: 400},
	},
}

// apiErrorBody is an error answer, whatever its API's shape.
type apiErrorBody struct {
	Message, Type, Code, Param string
}

// parseAPIError checks body against api's own error shape, field for
// field, and returns what it says; it reports a wrong shape through t.
func parseAPIError(t *testing.T, api string, status int, body []byte) apiErrorBody {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Errorf("%s error body is not a JSON object: %q", api, body)
		return apiErrorBody{}
	}
	str := func(raw json.RawMessage, what string, nullable bool) string {
		var s *string
		if err := json.Unmarshal(raw, &s); err != nil || (s == nil && !nullable) || (s != nil && *s == "" && !nullable) {
			t.Errorf("%s error: %s is %s, want a string", api, what, raw)
			return ""
		}
		if s == nil {
			return ""
		}
		return *s
	}
	var inner map[string]json.RawMessage
	keys := func(m map[string]json.RawMessage, want ...string) {
		if len(m) != len(want) {
			t.Errorf("%s error: keys %v, want exactly %v: %s", api, mapKeys(m), want, body)
		}
		for _, k := range want {
			if _, ok := m[k]; !ok {
				t.Errorf("%s error: no %q: %s", api, k, body)
			}
		}
	}
	var e apiErrorBody
	switch api {
	case "openai": // {"error": {"message", "type", "param", "code"}}
		keys(top, "error")
		json.Unmarshal(top["error"], &inner)
		keys(inner, "message", "type", "param", "code")
		e = apiErrorBody{Message: str(inner["message"], "message", false), Type: str(inner["type"], "type", false),
			Param: str(inner["param"], "param", true), Code: str(inner["code"], "code", true)}
	case "llamacpp": // {"error": {"code": status, "message", "type"}}
		keys(top, "error")
		json.Unmarshal(top["error"], &inner)
		keys(inner, "code", "message", "type")
		if code, err := strconv.Atoi(string(inner["code"])); err != nil || code != status {
			t.Errorf("llama.cpp error: code %s, want the status %d", inner["code"], status)
		}
		e = apiErrorBody{Message: str(inner["message"], "message", false), Type: str(inner["type"], "type", false)}
	case "ollama": // {"error": "message"}
		keys(top, "error")
		e = apiErrorBody{Message: str(top["error"], "error", false)}
	case "anthropic": // {"type": "error", "error": {"type", "message"}}
		keys(top, "type", "error")
		if str(top["type"], "type", false) != "error" {
			t.Errorf("anthropic error: type %s, want \"error\"", top["type"])
		}
		json.Unmarshal(top["error"], &inner)
		keys(inner, "type", "message")
		e = apiErrorBody{Message: str(inner["message"], "message", false), Type: str(inner["type"], "type", false)}
	default:
		t.Errorf("no error shape known for API %q", api)
	}
	return e
}

func mapKeys(m map[string]json.RawMessage) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// openaiParam checks that an OpenAI error names the offending field.
func openaiParam(field string) func(apiErrorBody) string {
	return func(e apiErrorBody) string {
		if e.Param != field || e.Type != "invalid_request_error" {
			return fmt.Sprintf("param %q type %q, want param %q, invalid_request_error", e.Param, e.Type, field)
		}
		return ""
	}
}

// modelNotFound checks an unknown-model answer in api's terms: OpenAI's
// model_not_found code, Ollama's `model "x" not found` text, Anthropic's
// not_found_error.
func modelNotFound(api, name string) func(apiErrorBody) string {
	return func(e apiErrorBody) string {
		ok := true
		switch api {
		case "openai":
			ok = e.Code == "model_not_found"
		case "ollama":
			ok = strings.HasPrefix(e.Message, fmt.Sprintf("model %q not found", name))
		case "anthropic":
			ok = e.Type == "not_found_error"
		}
		if !ok || !strings.Contains(e.Message, name) {
			return fmt.Sprintf("%+v does not say model %q was not found in %s's terms", e, name, api)
		}
		return ""
	}
}

// contextExceeded checks a prompt-past-the-context answer: OpenAI's code,
// elsewhere a message that says so.
func contextExceeded(api string) func(apiErrorBody) string {
	return func(e apiErrorBody) string {
		if api == "openai" && e.Code != "context_length_exceeded" {
			return fmt.Sprintf("code %q, want context_length_exceeded", e.Code)
		}
		if !strings.Contains(e.Message, "context") {
			return fmt.Sprintf("message %q does not mention the context", e.Message)
		}
		return ""
	}
}

// set returns an edit that sets a dotted path in a body.
func set(path string, v any) func(map[string]any) {
	return func(m map[string]any) { setPath(m, path, v) }
}

// del returns an edit that removes a dotted path from a body.
func del(path string) func(map[string]any) {
	return func(m map[string]any) { setPath(m, path, deleted{}) }
}

func edits(fs ...func(map[string]any)) func(map[string]any) {
	return func(m map[string]any) {
		for _, f := range fs {
			f(m)
		}
	}
}

type deleted struct{}

// setPath walks maps by key and arrays by index, creating maps on the way.
func setPath(m map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	var cur any = m
	for i, p := range parts {
		last := i == len(parts)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				if _, del := v.(deleted); del {
					delete(c, p)
				} else {
					c[p] = v
				}
				return
			}
			if _, ok := c[p]; !ok {
				c[p] = map[string]any{}
			}
			cur = c[p]
		case []any:
			k, _ := strconv.Atoi(p)
			if last {
				c[k] = v
				return
			}
			cur = c[k]
		default:
			panic("setPath: " + path)
		}
	}
}

// invalidUTF8 stands in the prompt for bytes JSON encoding would replace.
const invalidUTF8 = "INVALID-UTF8-GOES-HERE"

// longPrompt is far past the 4096-token context of the test stack, yet
// small next to --max-body.
var longPrompt = strings.Repeat("lorem 1 ipsum 2 dolor 3 sit 4 amet 5 ", 1500)

// badStack is the stack the bad-input tests run on: a body limit small
// enough to exceed cheaply, big enough for longPrompt.
func badStack(t *testing.T, o app.Options) *app.Stack {
	o.HTTP.MaxBody = 256 << 10
	if o.DataDir == "" {
		o.DataDir = t.TempDir() // the conversations' store
	}
	return startStack(t, o)
}

// sendBody sends one request and returns the status and body.
func sendBody(t *testing.T, method, url string, body []byte, header map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") && method == "GET" && body == nil {
		// A stream that runs until the client goes (/v1/status/events):
		// its first event is the answer.
		b, err := bufio.NewReader(resp.Body).ReadBytes('\n')
		if err != nil {
			t.Fatalf("%s %s: reading the first event: %v", method, url, err)
		}
		return resp.StatusCode, b
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading: %v", method, url, err)
	}
	return resp.StatusCode, b
}

// expectError checks that a request got status and api's error shape.
func expectError(t *testing.T, api string, status, wantStatus int, body []byte, check func(apiErrorBody) string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("status %d, want %d: %.300s", status, wantStatus, body)
		return
	}
	if status < 400 {
		return
	}
	e := parseAPIError(t, api, status, body)
	if check != nil {
		if msg := check(e); msg != "" {
			t.Error(msg)
		}
	}
}

// casesFor expands a route's entry into its bad-input cases.
func casesFor(r sfhttp.RouteInfo, br badRoute) []badCase {
	if br.body == nil {
		return nil
	}
	var cs []badCase
	add := func(name string, edit func(map[string]any), status int, check func(apiErrorBody) string) {
		cs = append(cs, badCase{name: name, edit: edit, status: status, check: check})
	}
	param := func(field string) func(apiErrorBody) string {
		if r.API == "openai" {
			return openaiParam(field)
		}
		return nil
	}
	for field, v := range br.wrongTypes {
		add(fmt.Sprintf("%s of the wrong type", field), set(field, v), 400, param(field))
	}
	for _, field := range br.required {
		add("missing "+field, del(field), 400, nil)
	}
	if br.model != "" {
		add("unknown model", set(br.model, "no-such-model"), 404, modelNotFound(r.API, "no-such-model"))
	}
	if br.prompt != "" {
		add("invalid UTF-8", set(br.prompt, "hello "+invalidUTF8), 400, nil)
	}
	if br.ctxBound {
		add("prompt past the context", set(br.prompt, longPrompt), 400, contextExceeded(r.API))
	}
	if br.limit != "" {
		add(br.limit+" -5", set(br.limit, -5), 400, param(br.limit))
		add(br.limit+" absurd", set(br.limit, 1<<40), 400, param(br.limit))
		add(br.limit+" past int64", set(br.limit, json.Number("99999999999999999999999")), 400, nil)
	}
	if br.temperature != "" {
		add("temperature -1", set(br.temperature, -1), 400, param(br.temperature))
	}
	if br.topP != "" {
		add("top_p 2", set(br.topP, 2), 400, param(br.topP))
	}
	return append(cs, br.extra...)
}

// marshalBody encodes a body, then swaps the invalid-UTF-8 placeholder for
// real invalid bytes (json.Marshal would have replaced them).
func marshalBody(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.ReplaceAll(b, []byte(invalidUTF8), []byte("\xff\xfe\xfd"))
}

// Every route the server has is in badInputRoutes: a route added without a
// line there fails here rather than going untested.
func TestBadInputCoversEveryRoute(t *testing.T) {
	st := badStack(t, app.Options{})
	for _, r := range st.Server.Routes() {
		if _, ok := badInputRoutes[r.Path]; !ok {
			t.Errorf("route %s %s has no entry in badInputRoutes (add one line)", r.Method, r.Path)
		}
	}
}

// The table: each route, each case, status and shape; afterwards the
// server still answers a normal request.
func TestBadInputTable(t *testing.T) {
	st := badStack(t, app.Options{})
	methods := map[string][]string{} // what each path answers
	for _, r := range st.Server.Routes() {
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	for _, r := range st.Server.Routes() {
		br := badInputRoutes[r.Path]
		if br.embedding {
			// A generation model refuses it; its cases run on an
			// embedding model (TestBadInputEmbeddingTable).
			t.Run(r.Path, func(t *testing.T) {
				status, body := sendBody(t, r.Method, st.URL()+r.Path, marshalBody(t, br.body("hello")), nil)
				expectError(t, r.API, status, 400, body, func(e apiErrorBody) string {
					if !strings.Contains(e.Message, "does not support embeddings") {
						return fmt.Sprintf("message %q does not say the model does not embed", e.Message)
					}
					return ""
				})
			})
			continue
		}
		t.Run(r.Path, func(t *testing.T) { badRouteCases(t, st, r, br, methods[r.Path]) })
	}
	// Unknown routes answer 404 in the shape their prefix implies.
	for path, api := range map[string]string{"/v1/nope": "openai", "/api/nope": "ollama", "/nope": "llamacpp", "/v1/messages/nope": "anthropic"} {
		t.Run("unknown route "+path, func(t *testing.T) {
			status, body := sendBody(t, "GET", st.URL()+path, nil, nil)
			expectError(t, api, status, 404, body, nil)
		})
	}
	// The server keeps serving.
	status, body := sendBody(t, "POST", st.URL()+"/v1/chat/completions", marshalBody(t, chatBody("still there?")), nil)
	if status != 200 {
		t.Fatalf("after the bad input: %d %s", status, body)
	}
	checkIdle(t, st.URL())
}

// badRouteCases runs one route's cases on st: the wrong method, malformed
// bodies, the good body, then the route's own cases.
func badRouteCases(t *testing.T, st *app.Stack, r sfhttp.RouteInfo, br badRoute, methods []string) {
	url := st.URL() + r.Path
	t.Run("wrong method", func(t *testing.T) {
		method := "POST"
		if r.Method == "POST" {
			method = "GET"
		}
		if slices.Contains(methods, method) { // GET lists, POST creates
			method = "PUT"
		}
		status, body := sendBody(t, method, url, nil, nil)
		expectError(t, r.API, status, 405, body, nil)
	})
	if br.body == nil {
		return
	}
	t.Run("malformed JSON", func(t *testing.T) {
		status, body := sendBody(t, r.Method, url, []byte(`{"model": "tiny", `), nil)
		expectError(t, r.API, status, 400, body, nil)
	})
	t.Run("empty body", func(t *testing.T) {
		status, body := sendBody(t, r.Method, url, nil, nil)
		expectError(t, r.API, status, 400, body, nil)
	})
	t.Run("not an object", func(t *testing.T) {
		status, body := sendBody(t, r.Method, url, []byte(`["hello"]`), nil)
		expectError(t, r.API, status, 400, body, nil)
	})
	t.Run("body over --max-body", func(t *testing.T) {
		expectTooLarge(t, st, r)
	})
	t.Run("good request", func(t *testing.T) {
		status, body := sendBody(t, r.Method, url, marshalBody(t, br.body("hello")), nil)
		if status != 200 {
			t.Fatalf("the route's good body got %d: %s", status, body)
		}
	})
	for _, c := range casesFor(r, br) {
		t.Run(c.name, func(t *testing.T) {
			m := br.body("hello")
			c.edit(m)
			status, body := sendBody(t, r.Method, url, marshalBody(t, m), nil)
			expectError(t, r.API, status, c.status, body, c.check)
		})
	}
}

// The embedding routes' cases, on an embedding model's stack; afterwards
// it still embeds.
func TestBadInputEmbeddingTable(t *testing.T) {
	st := badStack(t, app.Options{ModelPath: embedModel(t, "mean")})
	methods := map[string][]string{}
	for _, r := range st.Server.Routes() {
		methods[r.Path] = append(methods[r.Path], r.Method)
	}
	for _, r := range st.Server.Routes() {
		if br := badInputRoutes[r.Path]; br.embedding {
			t.Run(r.Path, func(t *testing.T) { badRouteCases(t, st, r, br, methods[r.Path]) })
		}
	}
	status, body := sendBody(t, "POST", st.URL()+"/v1/embeddings", []byte(`{"input":"still there?"}`), nil)
	if status != 200 {
		t.Fatalf("after the bad input: %d %s", status, body)
	}
}

// expectTooLarge sends headers that announce a body over --max-body and
// expects 413 in the route's shape. The body itself is not sent: the
// server refuses on Content-Length alone, and a peer that closes a socket
// with unread data in it resets the connection, which could destroy the
// answer before the client reads it.
func expectTooLarge(t *testing.T, st *app.Stack, r sfhttp.RouteInfo) {
	t.Helper()
	conn, err := net.Dial("tcp", st.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", r.Path, 1<<20)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to an oversized body: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	expectError(t, r.API, resp.StatusCode, 413, body, func(e apiErrorBody) string {
		if !strings.Contains(e.Message, "limit") {
			return fmt.Sprintf("message %q does not name the limit", e.Message)
		}
		return ""
	})
}

// Headers are input too: an unknown class is refused like a bad field.
func TestBadInputHeaders(t *testing.T) {
	st := badStack(t, app.Options{})
	status, body := sendBody(t, "POST", st.URL()+"/v1/chat/completions", marshalBody(t, chatBody("hello")), map[string]string{"X-Superfluid-Class": "vip"})
	expectError(t, "openai", status, 400, body, openaiParam("class"))
}
