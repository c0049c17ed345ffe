package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/fim"
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

// jsonPath is a decoding error's field path as the client wrote it:
// encoding/json names the Go struct a field is embedded from
// ("oaiTools.parallel_tool_calls"), a camel-case segment no body has.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	out := parts[:0]
	for _, p := range parts {
		if p != strings.ToLower(p) && strings.ToLower(p[:1]) == p[:1] && !strings.ContainsAny(p, "_-") {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ".")
}

// jsonError words a decoding failure for the client: which field had which
// wrong type, which number does not fit its field, or where the syntax
// broke.
func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		te.Field = jsonPath(te.Field)
		field := te.Field
		if field == "" {
			field = "the body"
		}
		want := jsonTypeName(te.Type.Kind().String())
		if num, ok := strings.CutPrefix(te.Value, "number "); ok && want == "a number" {
			// A number where a number belongs that the field cannot hold:
			// 1e400 overflows a float64, 1e30 an int64, 1.5 is no integer.
			return badParam(te.Field, "%s: %s %s", field, num, numberMisfit(te.Type.Kind().String()))
		}
		return badParam(te.Field, "%s: expected %s, got a JSON %s", field, want, te.Value)
	case errors.As(err, &se):
		return badRequest("malformed JSON at byte %d: %v", se.Offset, se)
	}
	return badRequest("malformed JSON: %v", err)
}

// numberMisfit says why a JSON number does not fit a numeric field.
func numberMisfit(kind string) string {
	if strings.HasPrefix(kind, "float") {
		return "is out of range (not a finite number)"
	}
	return "is not an integer this field can hold"
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

// promptBytesPerToken bounds the text a prompt may carry: a prompt of more
// than this many bytes per token of the context is refused before it is
// tokenized, so a 16 MiB body costs a length check, not a tokenizer run
// and a token array. Text in any script averages 2–6 bytes a token (CJK
// about 3 bytes a character, one or two characters a token), and a few
// vocabularies have tokens of long runs of spaces or symbols; 16 leaves
// room for all of that, so a refused prompt could not have fit the context
// anyway, while the work per request stays within 16 × n_ctx bytes.
const promptBytesPerToken = 16

// maxPromptBytes is the most text one prompt may carry in m's context.
func maxPromptBytes(m *Model) int { return promptBytesPerToken * max(m.Desc.Ctx, 1) }

// checkPromptBytes refuses a prompt of n bytes that could not fit the
// context whatever its tokens (see promptBytesPerToken).
func checkPromptBytes(m *Model, field string, n int) error {
	if limit := maxPromptBytes(m); n > limit {
		return &apiError{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded", Param: field,
			Msg: fmt.Sprintf("the prompt is %d bytes; a context of %d tokens takes at most %d bytes of text (%d per token)", n, m.Desc.Ctx, limit, promptBytesPerToken)}
	}
	return nil
}

// tokenize renders text to tokens with the model's BOS rule; special-token
// text in prompts is parsed (as llama.cpp's server does). Every prompt of
// every API is tokenized here, so text too long for the context is refused
// here before the tokenizer runs.
func tokenize(m *Model, text string, addBOS bool) ([]engine.Token, error) {
	if err := checkPromptBytes(m, "prompt", len(text)); err != nil {
		return nil, err
	}
	toks, err := m.Text.Tokenize(text, addBOS && m.Desc.AddBOS, true)
	if errors.Is(err, engine.ErrClosed) {
		// A handler still tokenizing after the drain gave the engine back.
		return nil, errShutDown
	}
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

// samplingFields are the sampling fields the APIs share, as a request
// sent them (nil: absent). DefaultTemperature is the API's own default.
type samplingFields struct {
	Temperature        *float64
	DefaultTemperature float64
	TopK               *int
	TopP, MinP         *float64
	Seed               *int64
	RepeatPenalty      *float64
	FrequencyPenalty   *float64
	PresencePenalty    *float64
}

// Bounds of the sampling fields. A repeat penalty divides the logits of
// tokens already seen; below minRepeatPenalty, with the temperature
// dividing again, a logit could overflow to +inf and leave the sampler
// nothing to draw from.
const (
	maxTemperature   = 100
	minRepeatPenalty = 0.01
	maxRepeatPenalty = 10
)

// sampling builds engine sampling from the fields every API shares. Omitted
// top_k, top_p and min_p take the model's recommendation, else
// llama-server's (samplingDefaults); an explicit value always wins. The
// result is normalized: a temperature below engine.MinTemperature (a
// denormal such as 1e-40 included) is greedy.
func sampling(m *Model, f samplingFields) (engine.Sampling, error) {
	s := engine.Greedy()
	s.TopK, s.TopP, s.MinP = samplingDefaults(m.Desc)
	t := f.DefaultTemperature
	if f.Temperature != nil {
		t = *f.Temperature
	}
	if !(t >= 0 && t <= maxTemperature) {
		return s, badParam("temperature", "temperature %v outside [0, %d]", t, maxTemperature)
	}
	s.Temperature = float32(t)
	if f.TopK != nil {
		if *f.TopK < 0 {
			return s, badParam("top_k", "top_k must not be negative")
		}
		// Past the vocabulary top_k keeps every token; clamping keeps a huge
		// one from wrapping negative in int32.
		s.TopK = int32(min(*f.TopK, math.MaxInt32))
	}
	if f.TopP != nil {
		// float32 must hold it too: 1e-50 is above 0 but rounds to it.
		if p := *f.TopP; !(p > 0 && p <= 1) || float32(p) <= 0 {
			return s, badParam("top_p", "top_p %v outside (0, 1]", p)
		}
		s.TopP = float32(*f.TopP)
	}
	if f.MinP != nil {
		if p := *f.MinP; !(p >= 0 && p <= 1) {
			return s, badParam("min_p", "min_p %v outside [0, 1]", p)
		}
		s.MinP = float32(*f.MinP)
	}
	if f.Seed != nil {
		s.Seed = uint64(*f.Seed)
	} else {
		s.Seed = uint64(time.Now().UnixNano())
	}
	if f.RepeatPenalty != nil {
		if p := *f.RepeatPenalty; !(p >= minRepeatPenalty && p <= maxRepeatPenalty) {
			return s, badParam("repeat_penalty", "repeat_penalty %v outside [%v, %d]", p, minRepeatPenalty, maxRepeatPenalty)
		}
		s.RepeatPenalty = float32(*f.RepeatPenalty)
	}
	for _, p := range []struct {
		name string
		v    *float64
		dst  *float32
	}{{"frequency_penalty", f.FrequencyPenalty, &s.FrequencyPenalty}, {"presence_penalty", f.PresencePenalty, &s.PresencePenalty}} {
		if p.v == nil {
			continue
		}
		if !(*p.v >= -2 && *p.v <= 2) {
			return s, badParam(p.name, "%s %v outside [-2, 2]", p.name, *p.v)
		}
		*p.dst = float32(*p.v)
	}
	s.Normalize()
	return s, nil
}

// samplingDefaults are d's truncation defaults (engine's SamplingDefaults),
// each checked: a model file recommending a value the engine refuses (a
// top_p of 0, a NaN) would otherwise fail every request that omits it, so
// such a value falls back to llama-server's.
func samplingDefaults(d *engine.Descriptor) (topK int32, topP, minP float32) {
	topK, topP, minP = d.SamplingDefaults()
	if topK < 0 {
		topK = engine.DefaultTopK
	}
	if !(topP > 0 && topP <= 1) {
		topP = engine.DefaultTopP
	}
	if !(minP >= 0 && minP <= 1) {
		minP = engine.DefaultMinP
	}
	return topK, topP, minP
}

// penaltyWindow reads repeat_last_n (llama.cpp's and Ollama's): -1 is the
// whole context, 0 turns the penalties off, and a window longer than the
// context is the whole context (the engine keeps a ring of that many
// tokens per lane, so a huge one must not reach it).
func penaltyWindow(field string, n *int, def int32, ctxSize int) (int32, error) {
	if n == nil {
		return def, nil
	}
	if *n < -1 {
		return 0, badParam(field, "%s must be -1 (the whole context), 0 (off) or a count of tokens", field)
	}
	return int32(min(*n, ctxSize, math.MaxInt32)), nil
}

// maxBiasEntries bounds a logit bias; more would only be a way to make a
// request expensive to check and every one of its steps slower.
const maxBiasEntries = 4096

// checkBias refuses a logit bias that leaves nothing to sample: with every
// token at -inf the sampler has no candidate (llama.cpp's dist sampler
// asserts on it), so such a request can only be a mistake.
func checkBias(m *Model, field string, bias []engine.LogitBias) error {
	if engine.BansEveryToken(bias, m.Desc.Vocab) {
		return badParam(field, "%s bans every token of the vocabulary: nothing could be generated", field)
	}
	return nil
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
		if err := checkStops(field, []string{one}, maxStops); err != nil {
			return nil, err
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badParam(field, "%s must be a string or an array of strings", field)
	}
	if err := checkStops(field, many, maxStops); err != nil {
		return nil, err
	}
	return many, nil
}

// boundFIM cuts a fill-in-the-middle request to the text that could reach
// the prompt, before anything is tokenized: the FIM builder keeps the text
// nearest the cursor and drops the rest, so the start of the prefix and of
// the typed prompt, the end of the suffix, and the oldest extra chunks
// beyond maxPromptBytes could never fit (see promptBytesPerToken). Editors
// send whole files; the cut keeps their requests served while bounding the
// tokenizer's work. The count of extra chunks dropped is returned.
func boundFIM(m *Model, r fim.Request) (fim.Request, int) {
	limit := maxPromptBytes(m)
	r.Prefix = keepTail(r.Prefix, limit)
	r.Prompt = keepTail(r.Prompt, limit)
	r.Suffix = keepHead(r.Suffix, limit)
	used, first := 0, len(r.Extra)
	for first > 0 && used+len(r.Extra[first-1].Text) <= limit {
		used += len(r.Extra[first-1].Text)
		first--
	}
	r.Extra = r.Extra[first:]
	return r, first
}

// keepTail is the last n bytes of s or fewer, starting on a character.
func keepTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	start := len(s) - n
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[start:]
}

// keepHead is the first n bytes of s or fewer, ending before a character.
func keepHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}
