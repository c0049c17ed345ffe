package task

import "context"

// arrivalKey is the context key of Announced.
type arrivalKey struct{}

// Announced marks ctx as the context of a request announced to its
// model's scheduler (Scheduler.Expect): SubmitAll calls arrived once the
// request's choices are submitted or refused, so that an idle runner
// gathering a burst stops waiting for it then, not when its handler
// returns (the handler calls arrived too, for a request that never
// submits).
func Announced(ctx context.Context, arrived func()) context.Context {
	return context.WithValue(ctx, arrivalKey{}, arrived)
}

// settleArrival calls the announcement's arrived of ctx, if it has one.
func settleArrival(ctx context.Context) {
	if arrived, _ := ctx.Value(arrivalKey{}).(func()); arrived != nil {
		arrived()
	}
}
