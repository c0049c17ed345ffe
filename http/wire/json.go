package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fasthttp"
)

// DecodeJSON reads the request body into v. Invalid UTF-8 is refused rather
// than silently replaced (encoding/json would turn it into U+FFFD and the
// model would see text the client never sent).
func DecodeJSON(ctx *fasthttp.RequestCtx, v any) error { return DecodeBody(ctx.PostBody(), v) }

// DecodeBody reads a request body held in memory into v, as DecodeJSON
// reads one that came over HTTP (a batch's lines).
func DecodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return BadRequest("the request body is empty; a JSON object is expected")
	}
	if !utf8.Valid(body) {
		return BadRequest("the request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return JSONError(err)
	}
	if dec.More() {
		return BadRequest("unexpected data after the JSON object")
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

// JSONError words a decoding failure for the client: which field had which
// wrong type, which number does not fit its field, or where the syntax
// broke.
func JSONError(err error) error {
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
			return BadParam(te.Field, "%s: %s %s", field, num, numberMisfit(te.Type.Kind().String()))
		}
		return BadParam(te.Field, "%s: expected %s, got a JSON %s", field, want, te.Value)
	case errors.As(err, &se):
		return BadRequest("malformed JSON at byte %d: %v", se.Offset, se)
	}
	return BadRequest("malformed JSON: %v", err)
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

// WriteJSON answers with v as a JSON body.
func WriteJSON(ctx *fasthttp.RequestCtx, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return ServerError("encoding the response: %v", err)
	}
	ctx.SetContentType("application/json")
	ctx.SetBody(b)
	return nil
}

// Finite reports whether f is neither NaN nor infinite.
func Finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
