package http

import (
	"github.com/valyala/fasthttp"
)

// streamAnthropic submits g, then streams the reply as Anthropic's
// server-sent events: message_start, one text content block
// (content_block_start, ping, content_block_delta per visible piece,
// content_block_stop), message_delta with the stop reason and usage, and
// message_stop. message_start cannot know how much of the prompt the
// prefix cache holds, so its input_tokens is the whole prompt and
// message_delta carries the split (the SDKs take the later counts). An
// engine failure mid-stream becomes an error event, as Anthropic sends for
// an overloaded or failed stream; a failed write cancels the generation.
func (s *Server) streamAnthropic(ctx *fasthttp.RequestCtx, m *Model, g *genSpec, id, model string) error {
	rctx, cancel := s.requestContext(ctx)
	st, err := submit(rctx, m, g)
	if err != nil {
		cancel()
		return err
	}
	start := anthropicResponse{ID: id, Type: "message", Role: "assistant", Model: model,
		Content: []anthropicText{}, Usage: anthropicUsage{InputTokens: len(g.Prompt)}}
	streamResponse(ctx, true, func(ew *eventWriter) {
		defer cancel()
		ew.send("message_start", anthropicMessageStart{Type: "message_start", Message: start})
		ew.send("content_block_start", anthropicBlockStart{Type: "content_block_start", ContentBlock: anthropicText{Type: "text"}})
		if ew.send("ping", anthropicEvent{Type: "ping"}) != nil {
			return
		}
		out, err := follow(rctx, m, g, st, false, func(d *delta) error {
			if len(d.Text) == 0 {
				return nil
			}
			return ew.send("content_block_delta", anthropicBlockDelta{Type: "content_block_delta",
				Delta: anthropicTextDelta{Type: "text_delta", Text: string(d.Text)}})
		})
		if err != nil {
			ew.fail(err)
			return
		}
		reason, seq := anthropicStopReason(out)
		ew.send("content_block_stop", anthropicBlockStop{Type: "content_block_stop"})
		ew.send("message_delta", anthropicMessageDelta{Type: "message_delta",
			Delta: anthropicStopDelta{StopReason: reason, StopSequence: seq}, Usage: anthropicUsageOf(g, out)})
		ew.send("message_stop", anthropicEvent{Type: "message_stop"})
	})
	return nil
}
