package http

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"superfluid/task"
)

// peekClosed reports whether the peer has closed conn, without consuming
// anything from it: a zero-byte MSG_PEEK read means end of stream. It
// answers false when it cannot tell (not a socket, or data is waiting).
func peekClosed(conn net.Conn) bool {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	var buf [1]byte
	rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		closed = n == 0 && err == nil || errors.Is(err, syscall.ECONNRESET)
		return true // never wait for readability
	})
	return closed
}

// watchClient cancels ctx's request when the client of a non-streaming
// request hangs up: fasthttp only notices at the next write, which for a
// whole response comes after all the work. It polls every interval until
// stop is closed — every quickWatch during the first quickWatchFor: an
// editor hangs up on a completion at its next keystroke, tens of
// milliseconds later, and the lane should be free by the one after.
func watchClient(conn net.Conn, cancel context.CancelFunc, stop <-chan struct{}, interval time.Duration) {
	defer func() {
		if v := recover(); v != nil {
			task.Recovered("client watch", v)
			cancel()
		}
	}()
	step := min(interval, quickWatch)
	t := time.NewTicker(step)
	defer t.Stop()
	slowAt := time.Now().Add(quickWatchFor)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if peekClosed(conn) {
				cancel()
				return
			}
			if step != interval && time.Now().After(slowAt) {
				step = interval
				t.Reset(step)
			}
		}
	}
}

// The client watch's first second polls every 20 ms: 50 peeks of a
// socket, nothing beside a request's work, and an editor's storm of
// keystrokes (20 a second, each hanging up on the last) then holds one
// lane at a time rather than one per poll interval's worth.
const (
	quickWatch    = 20 * time.Millisecond
	quickWatchFor = time.Second
)
