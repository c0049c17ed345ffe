package http

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/valyala/fasthttp"

	"superfluid/task"
)

// apiKind says whose error shape a route answers in.
type apiKind uint8

const (
	apiOpenAI apiKind = iota
	apiLlama
	apiOllama
	apiAnthropic
)

// String names the API the way RouteInfo reports it to tests.
func (k apiKind) String() string {
	switch k {
	case apiOpenAI:
		return "openai"
	case apiOllama:
		return "ollama"
	case apiAnthropic:
		return "anthropic"
	}
	return "llamacpp"
}

// apiError is a failed request: the status, a message for the client and
// the OpenAI-style type/code that each API maps into its own shape.
type apiError struct {
	Status int
	Type   string // invalid_request_error, authentication_error, not_found_error, server_error, …
	Code   string // optional machine code, e.g. context_length_exceeded
	Param  string // optional: the offending field
	Msg    string
}

func (e *apiError) Error() string { return e.Msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Msg: fmt.Sprintf(format, args...)}
}

func badParam(param, format string, args ...any) *apiError {
	e := badRequest(format, args...)
	e.Param = param
	return e
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: fasthttp.StatusNotFound, Type: "not_found_error", Code: "model_not_found", Msg: fmt.Sprintf(format, args...)}
}

func serverError(format string, args ...any) *apiError {
	return &apiError{Status: fasthttp.StatusInternalServerError, Type: "server_error", Msg: fmt.Sprintf(format, args...)}
}

func unavailable(msg string) *apiError {
	return &apiError{Status: fasthttp.StatusServiceUnavailable, Type: "unavailable_error", Msg: msg}
}

func contextExceeded(n, ctx int) *apiError {
	return &apiError{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded",
		Msg: fmt.Sprintf("the prompt is %d tokens, past the context of %d", n, ctx)}
}

// asAPIError turns any error into an apiError (500 for what is not one).
func asAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	if te, ok := task.AsError(err); ok {
		return fromTask(te)
	}
	return serverError("%v", err)
}

// writeError answers with err in the API's own error shape.
func writeError(ctx *fasthttp.RequestCtx, kind apiKind, err error) {
	e := asAPIError(err)
	ctx.Response.Reset()
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType("application/json")
	b, _ := json.Marshal(errorBody(kind, e))
	ctx.SetBody(b)
}

// errorBody is e in the API's error shape: the body of an error response,
// and the data of the error event that ends a failed stream.
func errorBody(kind apiKind, e *apiError) any {
	switch kind {
	case apiOpenAI:
		// {"error": {"message", "type", "param", "code"}}
		return map[string]any{"error": map[string]any{"message": e.Msg, "type": e.Type, "param": nullable(e.Param), "code": nullable(e.Code)}}
	case apiAnthropic:
		// {"type": "error", "error": {"type", "message"}}
		return map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(e), "message": e.Msg}}
	case apiOllama:
		// {"error": "message"}
		return map[string]any{"error": e.Msg}
	}
	// llama.cpp's server: {"error": {"code", "message", "type"}}
	return map[string]any{"error": map[string]any{"code": e.Status, "message": e.Msg, "type": e.Type}}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func anthropicErrorType(e *apiError) string {
	switch e.Status {
	case fasthttp.StatusUnauthorized:
		return "authentication_error"
	case fasthttp.StatusForbidden:
		return "permission_error"
	case fasthttp.StatusNotFound:
		return "not_found_error"
	case fasthttp.StatusRequestEntityTooLarge:
		return "request_too_large"
	case fasthttp.StatusServiceUnavailable:
		return "overloaded_error"
	case fasthttp.StatusTooManyRequests:
		return "rate_limit_error"
	}
	if e.Status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}
