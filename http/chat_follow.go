package http

import (
	"context"
	"log/slog"

	"superfluid/reply"
	"superfluid/sched"
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

// followTurn follows a submitted turn like follow, reading its text with
// the turn's parser. emit, when not nil, is called for every delta with
// the events it completed (none, often: text is held while it may be a
// marker) so that an API streaming logprobs still sees each token; the
// end of the turn calls it once more with the parser's last events and a
// nil delta. The turn's content, reasoning and calls are collected either
// way.
func followTurn(ctx context.Context, m *Model, g *genSpec, st *sched.Stream, emit func(evs []reply.Event, d *delta) error) (turnOut, error) {
	var out turnOut
	p := g.turn.format.NewParser(g.turn.parserOptions(m))
	take := func(evs []reply.Event) {
		for _, ev := range evs {
			switch ev.Kind {
			case reply.Content:
				out.Content += ev.Text
			case reply.Reasoning:
				out.Reasoning += ev.Text
			case reply.Call:
				out.Calls = append(out.Calls, ev.Call)
			}
		}
	}
	var err error
	out.outcome, err = follow(ctx, m, g, st, false, func(d *delta) error {
		evs := p.Feed(string(d.Text))
		take(evs)
		if emit == nil {
			return nil
		}
		return emit(evs, d)
	})
	if err != nil {
		return out, err
	}
	evs := p.Finish()
	take(evs)
	if emit != nil {
		if err := emit(evs, nil); err != nil {
			return out, err
		}
	}
	return out, nil
}

// parserOptions are the plan's options with warnings logged: a call the
// model botched is answered as content, and the log says why.
func (p *turnPlan) parserOptions(m *Model) reply.Options {
	o := p.opts
	o.Warn = func(msg string) {
		slog.Warn("tool call returned as content", "model", m.Name, "format", p.format.Name, "why", msg)
	}
	return o
}
