package http

import "sync"

// requestGate counts running requests and, once draining, refuses new
// ones. Entering and the drain decision share one lock, so no request can
// slip in after Shutdown saw the server idle (a WaitGroup's Add racing its
// Wait would).
type requestGate struct {
	mu       sync.Mutex
	running  int
	draining bool
	idle     chan struct{} // closed when draining and nothing runs
}

// enter admits a request unless the server is draining.
func (g *requestGate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.draining {
		return false
	}
	g.running++
	return true
}

// hold extends a running request: a streamed response, written by
// fasthttp after its handler has returned, counts as running until its
// last byte, so that Shutdown waits for it and newcomers meanwhile get 503
// rather than a closed listener. The caller already holds one count, so
// draining cannot have finished.
func (g *requestGate) hold() {
	g.mu.Lock()
	g.running++
	g.mu.Unlock()
}

// leave ends one count.
func (g *requestGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	if g.running == 0 && g.idle != nil {
		close(g.idle)
		g.idle = nil
	}
}

// drain refuses new requests and returns a channel closed once every
// running one has left.
func (g *requestGate) drain() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.draining = true
	ch := make(chan struct{})
	if g.running == 0 {
		close(ch)
	} else {
		if g.idle != nil {
			close(g.idle) // a second Shutdown: hand the waiter a fresh channel
		}
		g.idle = ch
	}
	return ch
}

func (g *requestGate) isDraining() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.draining
}
