package openai

import (
	"context"
	"encoding/json"
	"time"

	"superfluid/batch"
	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/sched"
	"superfluid/task"
)

// Answer runs one request of a batch on m, whole, and returns what a
// client would have been answered: the status and the body, the answer
// or the error in OpenAI's shape. url is the route the request names
// (/v1/chat/completions, /v1/completions or /v1/embeddings) and body its
// JSON; the request runs in class, whatever it holds, and cache, when not
// nil, answers and keeps suffix completions as the route does. No
// transport is involved: the caller has chosen m (a batch line's model)
// and ends the work through ctx. fetcher fetches the images a chat names
// by URL (nil: they are refused, as without --allow-remote-media).
func Answer(ctx context.Context, m *task.Model, url string, body []byte, class sched.Class, cache *task.CompletionCache, fetcher *media.Fetcher) (status int, resp []byte) {
	defer func() {
		if v := recover(); v != nil {
			status, resp = ErrorResponse(task.Recovered("batch request to "+url, v))
		}
	}()
	v, err := answer(ctx, m, url, body, namedClass(class), cache, fetcher)
	if err != nil {
		return ErrorResponse(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ErrorResponse(wire.ServerError("encoding the response: %v", err))
	}
	return 200, b
}

// ErrorResponse is err as OpenAI answers it: its status and its body.
func ErrorResponse(err error) (int, []byte) {
	e := wire.AsError(err)
	b, _ := json.Marshal(wire.ErrorBody(wire.OpenAI, e))
	return e.Status, b
}

// answer decodes a batch request for its route and runs it whole.
func answer(ctx context.Context, m *task.Model, url string, body []byte, cls classing, cache *task.CompletionCache, fetcher *media.Fetcher) (any, error) {
	switch url {
	case batch.ChatCompletions:
		var req oaiChatRequest
		if err := decodeWhole(body, &req, &req.Stream); err != nil {
			return nil, err
		}
		g, err := chatRequest(m, &req, cls, func(images [][]byte, remote []media.Remote) error {
			return wire.FetchMediaWith(ctx, fetcher, m, images, remote)
		})
		if err != nil {
			return nil, err
		}
		defer g.Media.Close()
		return chatWhole(ctx, m, g, wire.NewID("chatcmpl-"), time.Now().Unix())
	case batch.Completions:
		var req oaiCompletionRequest
		if err := decodeWhole(body, &req, &req.Stream); err != nil {
			return nil, err
		}
		plan, head, err := planCompletionRequest(m, &req, cls)
		if err != nil {
			return nil, err
		}
		if !plan.fromCache(m, cache) {
			if err := plan.completeWhole(ctx, m, cache); err != nil {
				return nil, err
			}
		}
		return plan.whole(head), nil
	case batch.Embeddings:
		var req oaiEmbeddingRequest
		if err := wire.DecodeBody(body, &req); err != nil {
			return nil, err
		}
		return embedWhole(ctx, m, &req, cls)
	}
	return nil, wire.NotFound("a batch request goes to %s, %s or %s, not %q", batch.ChatCompletions, batch.Completions, batch.Embeddings, url)
}

// decodeWhole decodes body into v, whose stream field *stream names: an
// answer in a batch is whole, never streamed.
func decodeWhole(body []byte, v any, stream *bool) error {
	if err := wire.DecodeBody(body, v); err != nil {
		return err
	}
	if *stream {
		return wire.BadParam("stream", "stream is not supported in a batch")
	}
	return nil
}
