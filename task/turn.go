package task

import (
	"context"
	"log/slog"

	"superfluid/reply"
	"superfluid/sched"
)

// ReplyPlan is how a chat turn's reply is read: the model's reply format
// and the options the turn's prompt set (a reasoning block left open, the
// lead the template wrote).
type ReplyPlan struct {
	Format  reply.Format
	Options reply.Options
}

// Turn is an assistant turn as it was generated and read.
type Turn struct {
	Outcome
	Reasoning string
	Content   string
	Calls     []reply.ToolCall
}

// FollowTurn follows a submitted chat turn like Follow, reading its text
// with the parser of s.Reply (which must be set). emit, when not nil, is
// called for every delta with the events it completed (none, often: text
// is held while it may be a marker) so that an API streaming logprobs
// still sees each token; the end of the turn calls it once more with the
// parser's last events and a nil delta. The turn's content, reasoning and
// calls are collected either way.
func FollowTurn(ctx context.Context, m *Model, s *Spec, st *sched.Stream, emit func(evs []reply.Event, d *Delta) error) (Turn, error) {
	var out Turn
	p := s.Reply.Format.NewParser(s.Reply.parserOptions(m))
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
	out.Outcome, err = Follow(ctx, m, s, st, false, func(d *Delta) error {
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
func (p *ReplyPlan) parserOptions(m *Model) reply.Options {
	o := p.Options
	o.Warn = func(msg string) {
		slog.Warn("tool call returned as content", "model", m.Name, "format", p.Format.Name, "why", msg)
	}
	return o
}
