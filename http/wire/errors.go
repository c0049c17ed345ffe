// Package wire is what a handler of any API needs of the transport:
// reading a JSON body with its errors worded for the client, writing a
// JSON answer, the event writer of a streamed answer, the request class
// header, and errors in each API's shape (the request core's typed errors
// included). The server proper — routes, admission, the drain gate,
// /metrics — stays in package http, which imports this one; an API's
// package imports only this one and task.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/task"
)

// API says whose error shape a route answers in.
type API uint8

const (
	OpenAI API = iota
	Llama
	Ollama
	Anthropic
)

// String names the API the way RouteInfo reports it to tests.
func (k API) String() string {
	switch k {
	case OpenAI:
		return "openai"
	case Ollama:
		return "ollama"
	case Anthropic:
		return "anthropic"
	}
	return "llamacpp"
}

// Error is a failed request: the status, a message for the client and
// the OpenAI-style type/code that each API maps into its own shape.
type Error struct {
	Status int
	Type   string // invalid_request_error, authentication_error, not_found_error, server_error, …
	Code   string // optional machine code, e.g. context_length_exceeded
	Param  string // optional: the offending field
	Msg    string
	// RetryAfter, when set, is sent as Retry-After (whole seconds, at
	// least 1): a 429's when to try again.
	RetryAfter time.Duration
	// RetryAfterMs, on a 429, is when the client may try again: the body's
	// retry_after_ms and the Retry-After header (whole seconds, rounded up).
	RetryAfterMs int64
}

func (e *Error) Error() string { return e.Msg }

func BadRequest(format string, args ...any) *Error {
	return &Error{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Msg: fmt.Sprintf(format, args...)}
}

func BadParam(param, format string, args ...any) *Error {
	e := BadRequest(format, args...)
	e.Param = param
	return e
}

func NotFound(format string, args ...any) *Error {
	return &Error{Status: fasthttp.StatusNotFound, Type: "not_found_error", Code: "model_not_found", Msg: fmt.Sprintf(format, args...)}
}

func ServerError(format string, args ...any) *Error {
	return &Error{Status: fasthttp.StatusInternalServerError, Type: "server_error", Msg: fmt.Sprintf(format, args...)}
}

func Unavailable(msg string) *Error {
	return &Error{Status: fasthttp.StatusServiceUnavailable, Type: "unavailable_error", Msg: msg}
}

// FromTask is a request core's error as the transport answers it: a status
// and an OpenAI-style type for its kind, its field, code and message kept.
func FromTask(te *task.Error) *Error {
	e := &Error{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Code: te.Code, Param: te.Param, Msg: te.Msg}
	switch te.Kind {
	case task.Overloaded:
		e.Status, e.Type = fasthttp.StatusServiceUnavailable, "overloaded_error"
	case task.TimedOut:
		e.Status, e.Type = fasthttp.StatusRequestTimeout, "timeout_error"
	case task.Unavailable:
		e.Status, e.Type = fasthttp.StatusServiceUnavailable, "unavailable_error"
	case task.Internal:
		e.Status, e.Type = fasthttp.StatusInternalServerError, "server_error"
	case task.NotSupported:
		e.Status, e.Type = fasthttp.StatusNotImplemented, "not_supported_error"
	case task.Cancelled:
		e.Status = 499 // nginx's "client closed request"
	case task.Forbidden:
		e.Status, e.Type = fasthttp.StatusForbidden, "permission_error"
	case task.RateLimited:
		e.Status, e.Type, e.RetryAfter = fasthttp.StatusTooManyRequests, "rate_limit_error", te.RetryAfter
	case task.Superseded:
		e.Status, e.Type = fasthttp.StatusConflict, "superseded_error"
	case task.Throttled:
		e.Status, e.Type = fasthttp.StatusTooManyRequests, "rate_limit_error"
		e.RetryAfterMs = max(te.RetryAfter.Milliseconds(), 1)
	}
	return e
}

// Convert is err with a request core's error (unwrapped) turned into an
// Error; other errors pass as they are.
func Convert(err error) error {
	if te, ok := err.(*task.Error); ok {
		return FromTask(te)
	}
	return err
}

// AsError turns any error into an Error (500 for what is neither an Error
// nor a request core's error).
func AsError(err error) *Error {
	var ae *Error
	if errors.As(err, &ae) {
		return ae
	}
	if te, ok := task.AsError(err); ok {
		return FromTask(te)
	}
	return ServerError("%v", err)
}

// WriteError answers with err in the API's own error shape.
func WriteError(ctx *fasthttp.RequestCtx, kind API, err error) {
	e := AsError(err)
	ctx.Response.Reset()
	ctx.SetStatusCode(e.Status)
	ctx.SetContentType("application/json")
	if e.RetryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(e.RetryAfter), 10))
	} else if e.RetryAfterMs > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.FormatInt((e.RetryAfterMs+999)/1000, 10))
	}
	b, _ := json.Marshal(ErrorBody(kind, e))
	ctx.SetBody(b)
}

// ErrorBody is e in the API's error shape: the body of an error response,
// and the data of the error event that ends a failed stream. A retry time
// goes beside the API's own fields, at the top (retry_after_ms).
func ErrorBody(kind API, e *Error) any {
	body := apiErrorBody(kind, e)
	if e.RetryAfterMs > 0 {
		body["retry_after_ms"] = e.RetryAfterMs
	}
	return body
}

func apiErrorBody(kind API, e *Error) map[string]any {
	switch kind {
	case OpenAI:
		// {"error": {"message", "type", "param", "code"}}
		return map[string]any{"error": map[string]any{"message": e.Msg, "type": e.Type, "param": nullable(e.Param), "code": nullable(e.Code)}}
	case Anthropic:
		// {"type": "error", "error": {"type", "message"}}
		return map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(e), "message": e.Msg}}
	case Ollama:
		// {"error": "message"}
		return map[string]any{"error": e.Msg}
	}
	// llama.cpp's server: {"error": {"code", "message", "type"}}
	return map[string]any{"error": map[string]any{"code": e.Status, "message": e.Msg, "type": e.Type}}
}

// RetryAfterSeconds is d as Retry-After's whole seconds: rounded up, at
// least 1, so that a client that waits that long finds room.
func RetryAfterSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func anthropicErrorType(e *Error) string {
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
