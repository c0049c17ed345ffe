package engine

import "time"

// Drafter guesses how lanes continue — a second, smaller model sharing the
// target's vocabulary (speculative decoding) — for the target to verify
// (Decode's draft). One goroutine, the scheduler's, owns it.
type Drafter interface {
	// Draft fills each request's Draft with up to Max tokens that may
	// follow its History; a request may get none. Drafts stay valid until
	// the next call. It returns the time it took (what a drafted step
	// costs beside the step itself). An error drafts nothing and leaves
	// the drafter usable.
	Draft(reqs []DraftRequest) (time.Duration, error)
}

// DraftRequest is one lane's request for a draft.
type DraftRequest struct {
	// Lane names the lane, so the drafter keeps its state between calls.
	Lane uint32
	// History is the lane's tokens so far, prompt and reply, ending with
	// the token the target feeds next.
	History []Token
	Max     int
	Draft   []Token // out
}
