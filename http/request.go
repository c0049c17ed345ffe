package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

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
