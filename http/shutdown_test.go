package http

import (
	"context"
	"errors"
	"testing"
	"time"

	"superfluid/http/wire"
)

// A shutdown that outlasts its drain period stops the scheduler under the
// requests still running: each answers 503 in its API's shape — an error
// event when its stream has begun — whether it was generating or queued.
// A generation holding tokens it has not rendered yet renders none of
// them once the scheduler has stopped: the engine (here its vocabulary,
// which reports any late use) is closed right after.
func TestShutdownMidGenerationAnswers503(t *testing.T) {
	for _, r := range requestShapes(50000) {
		t.Run(r.name, func(t *testing.T) {
			ts := startToy(t, toyOptions{lanes: 1, cfg: Config{Drain: 20 * time.Millisecond}})
			held, release := make(chan struct{}), make(chan struct{})
			setTokenHook(t, onceAt(5, func() { close(held); <-release }))
			type answer struct {
				status int
				body   string
			}
			running, queued := make(chan answer, 1), make(chan answer, 1)
			go func() {
				status, body := ts.post(t, r.path, r.body)
				running <- answer{status, body}
			}()
			<-held
			go func() {
				status, body := ts.post(t, r.path, r.body)
				queued <- answer{status, body}
			}()
			// One lane: the first request's other parts queue behind it,
			// then all of the second's.
			for deadline := time.Now().Add(20 * time.Second); ts.queued() < 2*r.parts-1; {
				if time.Now().After(deadline) {
					t.Fatalf("%d requests queued, want %d", ts.queued(), 2*r.parts-1)
				}
				time.Sleep(time.Millisecond)
			}

			if err := ts.srv.Shutdown(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Shutdown with requests running past the drain: %v", err)
			}
			ts.closeSched()
			ts.text.closed.Store(true) // the engine is closed after the scheduler
			close(release)

			for _, a := range []answer{<-running, <-queued} {
				if !r.strm {
					if a.status != 503 {
						t.Fatalf("whole answer %d %s, want 503", a.status, a.body)
					}
					if msg := errorShapeOf(t, r.kind, 503, []byte(a.body)); msg != wire.ErrShutDown.Msg {
						t.Errorf("503 says %q", msg)
					}
					continue
				}
				if a.status != 200 {
					t.Fatalf("streamed: %d %s", a.status, a.body)
				}
				if msg := errorEvent(t, r, a.body, 503); msg != wire.ErrShutDown.Msg {
					t.Errorf("the error event says %q", msg)
				}
			}
			if n := ts.text.late.Load(); n != 0 {
				t.Errorf("%d tokens rendered after the scheduler stopped", n)
			}
		})
	}
}
