package task

import "context"

// streamingKey is the context key of Streaming.
type streamingKey struct{}

// Streaming marks ctx as a request whose reply streams to its client
// token by token (the HTTP layer's one start of a streamed response).
// Work submitted under any other context — an answer given whole, a batch
// job — is taken whole (sched.Request.Whole): nobody reads its tokens as
// they come, so the scheduler gives its lane no inter-token deadline and
// prefills its neighbours beside it in full steps.
func Streaming(ctx context.Context) context.Context {
	return context.WithValue(ctx, streamingKey{}, true)
}

// takenWhole reports whether work submitted under ctx is answered whole.
func takenWhole(ctx context.Context) bool {
	streams, _ := ctx.Value(streamingKey{}).(bool)
	return !streams
}
