package http

import (
	"context"

	"superfluid/reply"
	"superfluid/sched"
	"superfluid/task"
)

// turnOut is an assistant turn as it was generated and read.
type turnOut struct {
	outcome
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

// followTurn follows a submitted turn with the core (task.FollowTurn),
// reading its text with the turn's parser.
func followTurn(ctx context.Context, m *Model, g *genSpec, st *sched.Stream, emit func(evs []reply.Event, d *delta) error) (turnOut, error) {
	t, err := task.FollowTurn(ctx, m.core(), g.spec(), st, emit)
	return turnOutOf(t), apiErr(err)
}
