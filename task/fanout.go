package task

import (
	"sync"

	"superfluid/panics"
)

// Recovered takes in a panic caught on a goroutine serving a request: it
// is logged with its stack and counted (panics.Request), and the request
// ends with the Internal error returned — every other request carries on.
func Recovered(where string, v any) *Error {
	panics.Recovered(panics.Request, v, "where", where)
	return InternalError("internal error in the %s", where)
}

// FanOut runs part(0) … part(n-1) each on its own goroutine (the choices
// of a request with n > 1, the prompts of a llama.cpp batch) and returns
// their errors once all have returned. A part that panics returns the
// Internal error of Recovered, not the process. ended, when not nil, hears
// each error as soon as its part returns it, so that the caller stops the
// other parts at once (and, streaming, tells the client).
func FanOut(what string, n int, part func(i int) error, ended func(err error)) []error {
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
			err = Recovered(what, v)
		}
	}()
	return part(i)
}
