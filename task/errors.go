// Package task is the request core: one request, whatever API sent it.
// It checks a request's generation fields, submits every choice to the
// model's scheduler with one rollback, follows each through the stop
// matcher, and says what went wrong in typed errors that each API words
// in its own shape (http/wire maps them to statuses). Nothing here knows
// of HTTP.
package task

import (
	"errors"
	"fmt"
	"time"
)

// Kind is what sort of failure an Error is; the transport picks a status
// and each API a type from it.
type Kind uint8

const (
	// Invalid is a request the client must change: a bad field (Param
	// names it), a prompt that does not tokenize, a refused grammar.
	Invalid Kind = iota
	// ContextExceeded is a prompt past the model's context.
	ContextExceeded
	// Overloaded is the scheduler's queue being full.
	Overloaded
	// TimedOut is the request's deadline passing before it could start.
	TimedOut
	// Unavailable is the server shutting down.
	Unavailable
	// Internal is a failure of ours: a generation that failed, a panic.
	Internal
	// WrongModel is a request the model is of the wrong kind for: an
	// embedding model asked to generate, a generation model to embed.
	WrongModel
	// NotSupported is a request this model cannot serve at all (a suffix
	// to a vocabulary without FIM tokens).
	NotSupported
	// Cancelled is a request whose client went away (or whose dispatched
	// batch request was abandoned) before it ran: nobody reads the answer.
	Cancelled
	// Forbidden is a request its API key may not make (a class its policy
	// leaves out).
	Forbidden
	// RateLimited is a request past its API key's rate or lane cap;
	// RetryAfter says when it may pass.
	RateLimited
	// Throttled is a request past a rate the server sheds at (the FIM
	// bucket): Error.RetryAfter says when to try again.
	Throttled
	// Superseded is an inline completion a newer one from the same client
	// replaced while it waited for a lane (FIMGate): it never ran.
	Superseded
)

// Error is a failed request in API-neutral terms.
type Error struct {
	Kind  Kind
	Param string // the offending field, when one is to blame
	Code  string // a machine code, e.g. context_length_exceeded, grammar_limit_exceeded
	Msg   string
	// RetryAfter is when a RateLimited request may be sent again, or, for a
	// Throttled one, how long until the client would be admitted.
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Msg }

// BadRequest is an Invalid error that blames no single field.
func BadRequest(format string, args ...any) *Error {
	return &Error{Kind: Invalid, Msg: fmt.Sprintf(format, args...)}
}

// BadParam is an Invalid error that blames field param.
func BadParam(param, format string, args ...any) *Error {
	return &Error{Kind: Invalid, Param: param, Msg: fmt.Sprintf(format, args...)}
}

// InternalError is a failure of the server's own.
func InternalError(format string, args ...any) *Error {
	return &Error{Kind: Internal, Msg: fmt.Sprintf(format, args...)}
}

// ShuttingDown is the server refusing work because it is shutting down.
func ShuttingDown(msg string) *Error { return &Error{Kind: Unavailable, Msg: msg} }

// ErrShutDown ends a generation the scheduler stopped because the server
// is shutting down (the drain period ran out before it finished).
var ErrShutDown = ShuttingDown("the server shut down before the generation finished")

// ContextExceededError is a prompt of n tokens refused by a context of ctx.
func ContextExceededError(n, ctx int) *Error {
	return &Error{Kind: ContextExceeded, Code: "context_length_exceeded",
		Msg: fmt.Sprintf("the prompt is %d tokens, past the context of %d", n, ctx)}
}

// WrongModelError is a model of the wrong kind for what was asked.
func WrongModelError(format string, args ...any) *Error {
	return &Error{Kind: WrongModel, Msg: fmt.Sprintf(format, args...)}
}

// errOverloaded is the scheduler's full queue.
var errOverloaded = &Error{Kind: Overloaded, Msg: "too many requests are queued; try again shortly"}

// errDeadline is a request whose deadline passed while it queued.
var errDeadline = &Error{Kind: TimedOut, Msg: "the request's deadline passed before it could start"}

// AsError is err as an *Error when it is one (wrapped or not).
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// Unsupported is an Invalid error for a field the server does not honour:
// it names the field and why, with the code unsupported_parameter.
func Unsupported(field, why string) *Error {
	e := BadParam(field, "%s is not supported: %s", field, why)
	e.Code = "unsupported_parameter"
	return e
}

// errSuperseded is the answer of a completion superseded while it waited.
var errSuperseded = &Error{Kind: Superseded, Code: "superseded",
	Msg: "a newer inline completion from the same client replaced this one before it started"}

// ThrottledError is an inline completion past the FIM rate, to be retried
// after wait.
func ThrottledError(wait time.Duration) *Error {
	ms := max(wait.Milliseconds(), 1)
	return &Error{Kind: Throttled, Code: "rate_limit_exceeded", RetryAfter: time.Duration(ms) * time.Millisecond,
		Msg: fmt.Sprintf("inline completion rate limit exceeded; retry in %d ms", ms)}
}
