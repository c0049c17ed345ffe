package http

import (
	"superfluid/reply"
	"superfluid/task"
)

// turnOut is an assistant turn as it was generated and read.
type turnOut struct {
	task.Outcome
	Reasoning string
	Content   string
	Calls     []reply.ToolCall
}

// finishReason is the turn's end as OpenAI names it: "tool_calls" when the
// model stopped after calling, else the generation's own end.
func (t *turnOut) finishReason() string {
	if len(t.Calls) > 0 && t.Finish == "stop" {
		return "tool_calls"
	}
	return t.Finish
}
