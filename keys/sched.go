package keys

import (
	"context"

	"superfluid/engine"
	"superfluid/sched"
	"superfluid/task"
)

// defaultReplyEstimate is what a generation that sets no token limit is
// estimated to reply at admission; its end settles the difference.
const defaultReplyEstimate = 256

// Scheduler is s with every submission of the request r admitted by its
// key's policy first (class, lane cap, tokens per minute) and settled
// when it ends. ctxLen bounds a reply's estimate.
func Scheduler(s task.Scheduler, r *Request, ctxLen int) task.Scheduler {
	return keyedScheduler{Scheduler: s, r: r, ctxLen: ctxLen}
}

type keyedScheduler struct {
	task.Scheduler
	r      *Request
	ctxLen int
}

func (s keyedScheduler) Submit(ctx context.Context, req sched.Request) (*sched.Stream, error) {
	lane, err := s.r.Lane(req.Class, Estimate(len(req.Prompt), req.MaxTokens, s.ctxLen))
	if err != nil {
		return nil, err
	}
	st, err := s.Scheduler.Submit(ctx, req)
	if err != nil {
		lane.Settle(0, 0)
		lane.release()
		return nil, err
	}
	// Every stream ends (the scheduler finishes even its queued ones on
	// close), so this goroutine does too.
	go func() {
		<-st.Done()
		r := st.Result()
		lane.Settle(r.PromptTokens, r.Generated)
	}()
	return st, nil
}

// RefusesClass is what the completion cache asks (task.ClassRefuser): a
// class the key may not use gets no cached answer.
func (s keyedScheduler) RefusesClass(c sched.Class) bool { return !s.r.c.allows(c) }

// Estimate is a generation's tokens as admission charges them: the prompt
// and its token limit, or defaultReplyEstimate without one, never past
// the context.
func Estimate(prompt, maxTokens, ctxLen int) int {
	reply := maxTokens
	if reply <= 0 {
		reply = defaultReplyEstimate
	}
	if ctxLen > 0 {
		reply = min(reply, max(0, ctxLen-prompt))
	}
	return prompt + reply
}

// Embedder is e with every embedding admitted by the client's policy
// first (class, tokens per minute).
func Embedder(e task.Embedder, c *Client) task.Embedder { return keyedEmbedder{Embedder: e, c: c} }

type keyedEmbedder struct {
	task.Embedder
	c *Client
}

func (e keyedEmbedder) Embed(ctx context.Context, inputs [][]engine.Token, class sched.Class) ([][]float32, error) {
	n := 0
	for _, in := range inputs {
		n += len(in)
	}
	if err := e.c.Embed(class, n); err != nil {
		return nil, err
	}
	return e.Embedder.Embed(ctx, inputs, class)
}
