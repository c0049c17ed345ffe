package responses

import (
	"context"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// respBuilder assembles a response's output items from the parsed reply,
// in the order the model wrote them, and — when send is set — words each
// step as the Responses stream's events: an item is added, its text
// arrives as deltas, it is done; a function call arrives whole (the
// parser hands calls over complete), so its arguments are one delta.
type respBuilder struct {
	m    *task.Model
	obj  *respObject
	send func(ev *respEvent) error // nil: not streaming
	seq  int
	open int // the output item text is going to, -1 none
}

func newRespBuilder(m *task.Model, obj *respObject, send func(ev *respEvent) error) *respBuilder {
	return &respBuilder{m: m, obj: obj, send: send, open: -1}
}

func (b *respBuilder) emit(ev respEvent) error {
	if b.send == nil {
		return nil
	}
	ev.SequenceNumber = b.seq
	b.seq++
	return b.send(&ev)
}

// start announces the response.
func (b *respBuilder) start() error {
	if err := b.emit(respEvent{Type: "response.created", Response: b.obj}); err != nil {
		return err
	}
	return b.emit(respEvent{Type: "response.in_progress", Response: b.obj})
}

// take adds the parser's events to the output.
func (b *respBuilder) take(evs []reply.Event) error {
	for _, ev := range evs {
		var err error
		switch ev.Kind {
		case reply.Content:
			err = b.text("message", ev.Text)
		case reply.Reasoning:
			err = b.text("reasoning", ev.Text)
		case reply.Call:
			err = b.call(ev.Call)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// text appends text to the open item of kind, opening one if need be.
// The whitespace a model writes between its reasoning, its answer and
// its calls opens no message.
func (b *respBuilder) text(kind, text string) error {
	if b.open < 0 || b.obj.Output[b.open].Type != kind {
		if kind == "message" {
			text = strings.TrimLeft(text, " \t\r\n")
		}
		if text == "" {
			return nil
		}
		if err := b.close("completed"); err != nil {
			return err
		}
		if err := b.add(kind); err != nil {
			return err
		}
	}
	it := &b.obj.Output[b.open]
	it.Content[0].Text += text
	delta := "response.output_text.delta"
	var lp *[]struct{}
	if kind == "reasoning" {
		delta = "response.reasoning_text.delta"
	} else {
		lp = &[]struct{}{}
	}
	return b.emit(respEvent{Type: delta, ItemID: it.ID, OutputIndex: intp(b.open), ContentIndex: intp(0), Delta: &text, Logprobs: lp})
}

// add opens an item of kind with its one (empty) content part.
func (b *respBuilder) add(kind string) error {
	it := respItemOut{Type: kind, Status: "in_progress"}
	part := reasoningText("")
	if kind == "message" {
		it.ID, part = wire.NewID("msg_"), outputText("")
	} else {
		it.ID = wire.NewID("rs_")
	}
	b.obj.Output = append(b.obj.Output, it)
	b.open = len(b.obj.Output) - 1
	if err := b.emit(respEvent{Type: "response.output_item.added", OutputIndex: intp(b.open), Item: &it}); err != nil {
		return err
	}
	b.obj.Output[b.open].Content = []respPartOut{part}
	return b.emit(respEvent{Type: "response.content_part.added", ItemID: it.ID, OutputIndex: intp(b.open), ContentIndex: intp(0), Part: &part})
}

// close ends the open item with status.
func (b *respBuilder) close(status string) error {
	if b.open < 0 {
		return nil
	}
	i := b.open
	b.open = -1
	it := &b.obj.Output[i]
	it.Status = status
	part := it.Content[0]
	done, lp := "response.output_text.done", &[]struct{}{}
	if it.Type == "reasoning" {
		done, lp = "response.reasoning_text.done", nil
	}
	if err := b.emit(respEvent{Type: done, ItemID: it.ID, OutputIndex: intp(i), ContentIndex: intp(0), Text: &part.Text, Logprobs: lp}); err != nil {
		return err
	}
	if err := b.emit(respEvent{Type: "response.content_part.done", ItemID: it.ID, OutputIndex: intp(i), ContentIndex: intp(0), Part: &part}); err != nil {
		return err
	}
	return b.emit(respEvent{Type: "response.output_item.done", OutputIndex: intp(i), Item: it})
}

// call adds a function call, whole.
func (b *respBuilder) call(c reply.ToolCall) error {
	if err := b.close("completed"); err != nil {
		return err
	}
	args := string(c.Arguments)
	if args == "" {
		args = "{}"
	}
	it := respItemOut{ID: wire.NewID("fc_"), Type: "function_call", Status: "in_progress", CallID: wire.NewID("call_"), Name: c.Name}
	i := len(b.obj.Output)
	b.obj.Output = append(b.obj.Output, it)
	if err := b.emit(respEvent{Type: "response.output_item.added", OutputIndex: intp(i), Item: &it}); err != nil {
		return err
	}
	if err := b.emit(respEvent{Type: "response.function_call_arguments.delta", ItemID: it.ID, OutputIndex: intp(i), Delta: &args}); err != nil {
		return err
	}
	if err := b.emit(respEvent{Type: "response.function_call_arguments.done", ItemID: it.ID, OutputIndex: intp(i), Arguments: &args, Name: c.Name}); err != nil {
		return err
	}
	it.Arguments, it.Status = args, "completed"
	b.obj.Output[i] = it
	return b.emit(respEvent{Type: "response.output_item.done", OutputIndex: intp(i), Item: &it})
}

// finish closes the output and concludes the response: completed, or
// incomplete when max_output_tokens cut it short. The terminal event is
// left to end, so that the response can be stored first: a client that
// has seen response.completed may name it at once.
func (b *respBuilder) finish(g *task.Request, out wire.TurnOut) error {
	status := "completed"
	if out.Finish == "length" {
		status = "incomplete"
		b.obj.IncompleteDetails = &respIncomplete{Reason: "max_output_tokens"}
	}
	if err := b.close(status); err != nil {
		return err
	}
	now := time.Now().Unix()
	b.obj.Status, b.obj.CompletedAt = status, &now
	u := &respUsage{InputTokens: len(g.Prompt), OutputTokens: out.Completed}
	u.InputTokensDetails.CachedTokens = out.Result.CachedTokens
	if out.Reasoning != "" {
		if toks, err := b.m.Text.Tokenize(out.Reasoning, false, false); err == nil {
			u.OutputTokensDetails.ReasoningTokens = min(len(toks), out.Completed)
		}
	}
	u.TotalTokens = u.InputTokens + u.OutputTokens
	b.obj.Usage = u
	return nil
}

// end sends the terminal event of a finished response.
func (b *respBuilder) end() error {
	event := "response.completed"
	if b.obj.Status == "incomplete" {
		event = "response.incomplete"
	}
	return b.emit(respEvent{Type: event, Response: b.obj})
}

// fail ends a streamed response that could not finish.
func (b *respBuilder) fail(err error) {
	e := wire.AsError(err)
	code := e.Code
	if code == "" {
		code = "server_error"
	}
	b.close("incomplete")
	b.obj.Status, b.obj.Error = "failed", &respError{Code: code, Message: e.Msg}
	b.emit(respEvent{Type: "response.failed", Response: b.obj})
}

// streamResponses submits the job, then streams its events (release
// frees its conversation once it has ended); the finished
// response is stored like an unstreamed one. A failed generation ends the
// stream with response.failed (and is not stored); a client that went
// away cancels it.
func (a *api) streamResponses(ctx *fasthttp.RequestCtx, job *respJob, release func()) error {
	var run *task.Job
	err := a.host.Stream(ctx, true, func(rctx context.Context) error {
		var err error
		run, err = task.Start(rctx, job.m, job.g)
		return err
	}, func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter) {
		defer release()
		b := newRespBuilder(job.m, &job.obj, func(ev *respEvent) error { return ew.Send(ev.Type, ev) })
		if b.start() != nil {
			return
		}
		out, err := wire.FollowOne(rctx, run, func(evs []reply.Event, _ *task.Delta) error { return b.take(evs) })
		if err != nil {
			if rctx.Err() == nil {
				b.fail(err)
			}
			return
		}
		if b.finish(job.g, out) != nil {
			return
		}
		if err := a.appendTurn(job); err != nil {
			b.fail(err)
			return
		}
		a.keepResponse(job)
		b.end()
	})
	if err != nil {
		release() // nothing streams: produce never runs
	}
	return err
}

func intp(i int) *int { return &i }
