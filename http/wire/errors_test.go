package wire

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/task"
)

// A 429 says when to come back in whole seconds, rounded up, at least 1;
// every API's answer carries it.
func TestRetryAfter(t *testing.T) {
	for d, want := range map[time.Duration]string{time.Nanosecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", 15 * time.Second: "15"} {
		for _, api := range []API{OpenAI, Llama, Ollama, Anthropic} {
			var ctx fasthttp.RequestCtx
			ctx.Response.Header.Set("Retry-After", "stale")
			WriteError(&ctx, api, FromTask(&task.Error{Kind: task.RateLimited, Msg: "slow", RetryAfter: d}))
			if got := string(ctx.Response.Header.Peek("Retry-After")); ctx.Response.StatusCode() != 429 || got != want {
				t.Errorf("%v on %v: %d Retry-After %q, want 429 %q", d, api, ctx.Response.StatusCode(), got, want)
			}
		}
	}
	var ctx fasthttp.RequestCtx
	WriteError(&ctx, OpenAI, BadRequest("no"))
	if v := ctx.Response.Header.Peek("Retry-After"); v != nil {
		t.Errorf("a 400 says Retry-After %q", v)
	}
}

// Each kind of request-core error reaches the client with the status and
// type the APIs answered it with before the core existed, its field and
// code kept, wrapped or not.
func TestCoreErrorsMapToStatuses(t *testing.T) {
	for _, c := range []struct {
		err          *task.Error
		status       int
		typ, param   string
		code         string
		anthropicTyp string
	}{
		{task.BadParam("top_p", "bad"), 400, "invalid_request_error", "top_p", "", "invalid_request_error"},
		{task.ContextExceededError(9, 8), 400, "invalid_request_error", "", "context_length_exceeded", "invalid_request_error"},
		{&task.Error{Kind: task.Overloaded, Msg: "full"}, 503, "overloaded_error", "", "", "overloaded_error"},
		{&task.Error{Kind: task.TimedOut, Msg: "late"}, 408, "timeout_error", "", "", "invalid_request_error"},
		{task.ErrShutDown, 503, "unavailable_error", "", "", "overloaded_error"},
		{task.InternalError("boom"), 500, "server_error", "", "", "api_error"},
		{task.WrongModelError("embeds only"), 400, "invalid_request_error", "", "", "invalid_request_error"},
		{&task.Error{Kind: task.NotSupported, Msg: "no FIM"}, 501, "not_supported_error", "", "", "api_error"},
		{&task.Error{Kind: task.Forbidden, Param: "class", Code: "class_not_allowed", Msg: "no chat"}, 403, "permission_error", "class", "class_not_allowed", "permission_error"},
		{&task.Error{Kind: task.RateLimited, Code: "rate_limit_exceeded", Msg: "slow down", RetryAfter: time.Second}, 429, "rate_limit_error", "", "rate_limit_exceeded", "rate_limit_error"},
		{&task.Error{Kind: task.Superseded, Code: "superseded", Msg: "replaced"}, 409, "superseded_error", "", "superseded", "invalid_request_error"},
	} {
		for _, err := range []error{c.err, fmt.Errorf("context: %w", c.err)} {
			e := AsError(err)
			if e.Status != c.status || e.Type != c.typ || e.Param != c.param || e.Code != c.code || e.Msg != c.err.Msg {
				t.Errorf("%v: %+v", err, e)
			}
			b, _ := json.Marshal(ErrorBody(Anthropic, e))
			if want := fmt.Sprintf(`{"error":{"message":%q,"type":%q},"type":"error"}`, c.err.Msg, c.anthropicTyp); string(b) != want {
				t.Errorf("%v in Anthropic's shape: %s, want %s", err, b, want)
			}
		}
	}
	if err := Convert(task.BadRequest("x")); AsError(err).Status != 400 {
		t.Errorf("Convert: %v", err)
	}
	if AsError(fmt.Errorf("plain")).Status != 500 {
		t.Error("an unknown error is not a 500")
	}
}

// A shed inline completion is a 429 in every API's shape, with the retry
// time in the body (retry_after_ms) and, in whole seconds rounded up, in
// Retry-After.
func TestThrottledIs429WithRetryAfterInEveryShape(t *testing.T) {
	te := task.ThrottledError(1250 * time.Millisecond)
	for _, c := range []struct {
		api  API
		want string
	}{
		{OpenAI, `{"error":{"code":"rate_limit_exceeded","message":%q,"param":null,"type":"rate_limit_error"},"retry_after_ms":1250}`},
		{Anthropic, `{"error":{"message":%q,"type":"rate_limit_error"},"retry_after_ms":1250,"type":"error"}`},
		{Ollama, `{"error":%q,"retry_after_ms":1250}`},
		{Llama, `{"error":{"code":429,"message":%q,"type":"rate_limit_error"},"retry_after_ms":1250}`},
	} {
		ctx := &fasthttp.RequestCtx{}
		WriteError(ctx, c.api, fmt.Errorf("start: %w", te))
		if got := ctx.Response.StatusCode(); got != 429 {
			t.Errorf("%s: status %d, want 429", c.api, got)
		}
		if got := string(ctx.Response.Header.Peek("Retry-After")); got != "2" {
			t.Errorf("%s: Retry-After %q, want 2", c.api, got)
		}
		if want := fmt.Sprintf(c.want, te.Msg); string(ctx.Response.Body()) != want {
			t.Errorf("%s: body %s\nwant %s", c.api, ctx.Response.Body(), want)
		}
	}
}
