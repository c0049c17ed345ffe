package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/sched"
)

// decodeJSON reads the request body into v. Invalid UTF-8 is refused rather
// than silently replaced (encoding/json would turn it into U+FFFD and the
// model would see text the client never sent).
func decodeJSON(ctx *fasthttp.RequestCtx, v any) error {
	body := ctx.PostBody()
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("the request body is empty; a JSON object is expected")
	}
	if !utf8.Valid(body) {
		return badRequest("the request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return badRequest("unexpected data after the JSON object")
	}
	return nil
}

// jsonError words a decoding failure for the client: which field had which
// wrong type, or where the syntax broke.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "the body"
		}
		return badParam(te.Field, "%s: expected %s, got a JSON %s", field, jsonTypeName(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return badRequest("malformed JSON at byte %d: %v", se.Offset, se)
	}
	return badRequest("malformed JSON: %v", err)
}

func jsonTypeName(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "a boolean"
	case kind == "slice", kind == "array":
		return "an array"
	case kind == "map", kind == "struct":
		return "an object"
	}
	return kind
}

// requestClass is the class a chat or completion request runs in: the
// X-Superfluid-Class header, else the server's default.
func (s *Server) requestClass(ctx *fasthttp.RequestCtx, field string) (sched.Class, error) {
	name := string(ctx.Request.Header.Peek("X-Superfluid-Class"))
	if name == "" {
		name = field
	}
	if name == "" {
		return s.cfg.DefaultClass, nil
	}
	c, err := sched.ParseClass(name)
	if err != nil {
		return 0, badParam("class", "%v", err)
	}
	return c, nil
}

// checkModelName refuses a model name the server does not serve ("" is
// fine: clients that have one model often send none).
func checkModelName(m *Model, name string) error {
	if name == "" || name == m.Name || strings.TrimSuffix(name, ":latest") == m.Name {
		return nil
	}
	return notFound("model %q not found; this server serves %q", name, m.Name)
}

// checkPrompt refuses an empty prompt and one that leaves no room in the
// context.
func checkPrompt(m *Model, prompt []engine.Token) error {
	if len(prompt) == 0 {
		return badParam("prompt", "the prompt is empty")
	}
	if len(prompt) >= m.Desc.Ctx {
		return contextExceeded(len(prompt), m.Desc.Ctx)
	}
	return nil
}

// tokenize renders text to tokens with the model's BOS rule; special-token
// text in prompts is parsed (as llama.cpp's server does).
func tokenize(m *Model, text string, addBOS bool) ([]engine.Token, error) {
	toks, err := m.Text.Tokenize(text, addBOS && m.Desc.AddBOS, true)
	if err != nil {
		return nil, badRequest("cannot tokenize the prompt: %v", err)
	}
	return toks, nil
}

// maxTokens checks a requested generation limit; 0 or absent is unbounded
// (the context bounds it).
func maxTokens(field string, n *int, ctxSize int) (int, error) {
	if n == nil {
		return 0, nil
	}
	if *n < 0 && *n != -1 {
		return 0, badParam(field, "%s must not be negative", field)
	}
	if *n == -1 {
		return 0, nil // llama.cpp's "no limit"
	}
	if *n > 4*ctxSize && *n > 1<<20 {
		return 0, badParam(field, "%s of %d is absurd for a context of %d", field, *n, ctxSize)
	}
	return *n, nil
}

// sampling builds engine sampling from the optional fields the APIs share.
// A missing temperature means the API's default, given as def.
func sampling(temp *float64, def float64, topK *int, topP, minP *float64, seed *int64, repeat, freq, presence *float64) (engine.Sampling, error) {
	s := engine.Greedy()
	t := def
	if temp != nil {
		t = *temp
	}
	if t < 0 || t > 100 {
		return s, badParam("temperature", "temperature %v outside [0, 100]", t)
	}
	s.Temperature = float32(t)
	if topK != nil {
		if *topK < 0 {
			return s, badParam("top_k", "top_k must not be negative")
		}
		// Past the vocabulary top_k keeps every token; clamping keeps a huge
		// one from wrapping negative in int32.
		s.TopK = int32(min(*topK, math.MaxInt32))
	}
	if topP != nil {
		if *topP <= 0 || *topP > 1 {
			return s, badParam("top_p", "top_p %v outside (0, 1]", *topP)
		}
		s.TopP = float32(*topP)
	}
	if minP != nil {
		if *minP < 0 || *minP > 1 {
			return s, badParam("min_p", "min_p %v outside [0, 1]", *minP)
		}
		s.MinP = float32(*minP)
	}
	if seed != nil {
		s.Seed = uint64(*seed)
	} else {
		s.Seed = uint64(time.Now().UnixNano())
	}
	if repeat != nil {
		if *repeat <= 0 || *repeat > 10 {
			return s, badParam("repeat_penalty", "repeat_penalty %v outside (0, 10]", *repeat)
		}
		s.RepeatPenalty = float32(*repeat)
	}
	for name, p := range map[string]*float64{"frequency_penalty": freq, "presence_penalty": presence} {
		if p != nil && (*p < -2 || *p > 2) {
			return s, badParam(name, "%s %v outside [-2, 2]", name, *p)
		}
	}
	if freq != nil {
		s.FrequencyPenalty = float32(*freq)
	}
	if presence != nil {
		s.PresencePenalty = float32(*presence)
	}
	return s, nil
}

// requestContext is the context a request's generation runs under: it ends
// when the client hangs up, or when the returned func is called (always
// call it: for a streamed response, when the stream ends). A watcher peeks
// at the socket every ClientPoll until then: fasthttp only notices a gone
// client at its next write, which for a whole response comes after all the
// work, and for a stream not before the first token — a long prompt's
// prefill would otherwise run on for nobody.
func (s *Server) requestContext(ctx *fasthttp.RequestCtx) (context.Context, func()) {
	if parent := dispatchParent(ctx); parent != nil {
		return context.WithCancel(parent)
	}
	c, cancel := context.WithCancel(context.Background())
	go watchClient(ctx.Conn(), cancel, c.Done(), s.cfg.ClientPoll)
	return c, cancel
}

// stopList reads OpenAI's "stop": a string or an array of strings.
func stopList(raw json.RawMessage, field string) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badParam(field, "%s must be a string or an array of strings", field)
	}
	if len(many) > 16 {
		return nil, badParam(field, "at most 16 stop sequences")
	}
	return many, nil
}
