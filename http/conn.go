package http

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"superfluid/http/wire"
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
// stop is closed.
func watchClient(conn net.Conn, cancel context.CancelFunc, stop <-chan struct{}, interval time.Duration) {
	defer func() {
		if v := recover(); v != nil {
			wire.Recovered("client watch", v)
			cancel()
		}
	}()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			if peekClosed(conn) {
				cancel()
				return
			}
		}
	}
}
