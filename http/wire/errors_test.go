package wire

import (
	"encoding/json"
	"fmt"
	"testing"

	"superfluid/task"
)

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
