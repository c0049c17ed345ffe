package anthropic

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"hash"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// stream submits the request, then streams the reply as Anthropic's
// server-sent events: message_start and a ping; then content blocks as
// the reply's parser reads them — thinking (thinking_delta pieces, then a
// signature_delta), text (text_delta pieces), tool_use (started with its
// id, name and an empty input, then the arguments as one input_json_delta)
// — each opened by content_block_start and closed by content_block_stop;
// then message_delta with the stop reason and usage, and message_stop.
// message_start cannot know how much of the prompt the prefix cache holds,
// so its input_tokens is the whole prompt and message_delta carries the
// split (the SDKs take the later counts). An engine failure mid-stream
// becomes an error event, as Anthropic sends for an overloaded or failed
// stream; a failed write cancels the generation.
func (a *api) stream(ctx *fasthttp.RequestCtx, m *task.Model, p *prepared, id, model string) error {
	g := p.g
	var job *task.Job
	begin := response{ID: id, Type: "message", Role: "assistant", Model: model,
		Content: []outBlock{}, Usage: usage{InputTokens: len(g.Prompt)}}
	return a.host.Stream(ctx, true, func(rctx context.Context) error {
		var err error
		job, err = task.Start(rctx, m, g)
		return err
	}, func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter) {
		ew.Send("message_start", messageStart{Type: "message_start", Message: begin})
		if ew.Send("ping", event{Type: "ping"}) != nil {
			return
		}
		bw := &blockWriter{send: ew.Send, omitThinking: p.omitThinking}
		out, err := wire.FollowOne(rctx, job, func(evs []reply.Event, _ *task.Delta) error { return bw.events(evs) })
		if err != nil {
			ew.Fail(err)
			return
		}
		if err := bw.finish(); err != nil {
			return
		}
		reason, seq := stopReason(out)
		ew.Send("message_delta", messageDelta{Type: "message_delta",
			Delta: stopDelta{StopReason: reason, StopSequence: seq}, Usage: usageOf(len(g.Prompt), p.marked(), out.Outcome)})
		ew.Send("message_stop", event{Type: "message_stop"})
	})
}

// blockWriter words a turn's events as content block events,
// opening a block when the kind of text changes and closing the open one
// before the next.
type blockWriter struct {
	send         func(event string, v any) error
	omitThinking bool
	index        int    // the open block's index, or the next one's
	open         string // the open block's type: "", "text" or "thinking"
	thought      hash.Hash
}

func (w *blockWriter) events(evs []reply.Event) error {
	for _, ev := range evs {
		var err error
		switch ev.Kind {
		case reply.Reasoning:
			err = w.reasoning(ev.Text)
		case reply.Content:
			err = w.text(ev.Text)
		case reply.Call:
			err = w.call(ev.Call)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *blockWriter) text(t string) error {
	if t == "" {
		return nil
	}
	if err := w.openBlock("text"); err != nil {
		return err
	}
	return w.delta(deltaBody{Type: "text_delta", Text: &t})
}

func (w *blockWriter) reasoning(t string) error {
	if t == "" {
		return nil
	}
	if err := w.openBlock("thinking"); err != nil {
		return err
	}
	w.thought.Write([]byte(t))
	if w.omitThinking {
		return nil
	}
	return w.delta(deltaBody{Type: "thinking_delta", Thinking: &t})
}

func (w *blockWriter) call(c reply.ToolCall) error {
	if err := w.closeBlock(); err != nil {
		return err
	}
	block := outBlock{Type: "tool_use", ID: wire.NewID("toolu_"), Name: c.Name, Input: emptyInput}
	if err := w.send("content_block_start", blockStart{Type: "content_block_start", Index: w.index, ContentBlock: block}); err != nil {
		return err
	}
	args := string(callInput(c.Arguments))
	if err := w.delta(deltaBody{Type: "input_json_delta", PartialJSON: &args}); err != nil {
		return err
	}
	return w.stop()
}

// emptyInput is a tool_use block's input as content_block_start shows it:
// the arguments follow as input_json_delta.
var emptyInput = json.RawMessage(`{}`)

// openBlock makes a block of kind the open one.
func (w *blockWriter) openBlock(kind string) error {
	if w.open == kind {
		return nil
	}
	if err := w.closeBlock(); err != nil {
		return err
	}
	block := outBlock{Type: kind}
	empty := ""
	switch kind {
	case "text":
		block.Text = &empty
	case "thinking":
		block.Thinking, block.Signature = &empty, &empty
		w.thought = sha256.New()
	}
	w.open = kind
	return w.send("content_block_start", blockStart{Type: "content_block_start", Index: w.index, ContentBlock: block})
}

// closeBlock closes the open block, if any: a thinking block gets its
// signature first.
func (w *blockWriter) closeBlock() error {
	switch w.open {
	case "":
		return nil
	case "thinking":
		sig := signatureOf(w.thought)
		if err := w.delta(deltaBody{Type: "signature_delta", Signature: &sig}); err != nil {
			return err
		}
	}
	w.open = ""
	return w.stop()
}

func (w *blockWriter) delta(d deltaBody) error {
	return w.send("content_block_delta", blockDelta{Type: "content_block_delta", Index: w.index, Delta: d})
}

func (w *blockWriter) stop() error {
	err := w.send("content_block_stop", blockStop{Type: "content_block_stop", Index: w.index})
	w.index++
	return err
}

// finish closes the open block; a turn that wrote no block at all gets an
// empty text block, as the non-streamed message has.
func (w *blockWriter) finish() error {
	if w.open == "" && w.index == 0 {
		if err := w.openBlock("text"); err != nil {
			return err
		}
	}
	return w.closeBlock()
}
