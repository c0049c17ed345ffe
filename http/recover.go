package http

import (
	"sync"
	"sync/atomic"

	"superfluid/panics"
)

// recovered takes in a panic caught on a goroutine serving a request: it
// is logged with its stack and counted (panics.Request), and the request
// ends with the 500 returned — every other request carries on.
func recovered(where string, v any) *apiError {
	panics.Recovered(panics.Request, v, "where", where)
	return serverError("internal error in the %s", where)
}

// tokenHook, when set, runs on the goroutine following a generation for
// each token it reads (n counts them from 1), before the token is rendered.
// Tests panic in it, or hold a stream at a known point, through the real
// handlers; it is nil in service.
var tokenHook atomic.Pointer[func(g *genSpec, n int)]

// fanOut runs part(0) … part(n-1) each on its own goroutine (the choices
// of a request with n > 1, the prompts of a llama.cpp batch) and returns
// their errors once all have returned. A part that panics returns the 500
// of recovered, not the process. ended, when not nil, hears each error as
// soon as its part returns it, so that the caller stops the other parts at
// once (and, streaming, tells the client).
func fanOut(what string, n int, part func(i int) error, ended func(err error)) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = runPart(what, i, part)
			if errs[i] != nil && ended != nil {
				ended(errs[i])
			}
		}()
	}
	wg.Wait()
	return errs
}

func runPart(what string, i int, part func(i int) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = recovered(what, v)
		}
	}()
	return part(i)
}
