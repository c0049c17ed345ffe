package http

// The transport's error shapes live in http/wire; these are their names
// in this package while the API families still live here.

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
)

type (
	apiKind  = wire.API
	apiError = wire.Error
)

const (
	apiOpenAI    = wire.OpenAI
	apiLlama     = wire.Llama
	apiOllama    = wire.Ollama
	apiAnthropic = wire.Anthropic
)

func badRequest(format string, args ...any) *apiError { return wire.BadRequest(format, args...) }

func badParam(param, format string, args ...any) *apiError {
	return wire.BadParam(param, format, args...)
}

func notFound(format string, args ...any) *apiError { return wire.NotFound(format, args...) }

func serverError(format string, args ...any) *apiError { return wire.ServerError(format, args...) }

func unavailable(msg string) *apiError { return wire.Unavailable(msg) }

func contextExceeded(n, ctx int) *apiError {
	return &apiError{Status: fasthttp.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded",
		Msg: fmt.Sprintf("the prompt is %d tokens, past the context of %d", n, ctx)}
}

func asAPIError(err error) *apiError { return wire.AsError(err) }

func writeError(ctx *fasthttp.RequestCtx, kind apiKind, err error) { wire.WriteError(ctx, kind, err) }

func errorBody(kind apiKind, e *apiError) any { return wire.ErrorBody(kind, e) }

func decodeJSON(ctx *fasthttp.RequestCtx, v any) error { return wire.DecodeJSON(ctx, v) }

func jsonError(err error) error { return wire.JSONError(err) }

func writeJSON(ctx *fasthttp.RequestCtx, v any) error { return wire.WriteJSON(ctx, v) }

func finite(f float64) bool { return wire.Finite(f) }

func byteList(b []byte) []int { return wire.ByteList(b) }

type eventWriter = wire.EventWriter
