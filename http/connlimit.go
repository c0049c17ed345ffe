package http

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// perIPListener caps the connections one client address holds open.
// fasthttp's MaxConnsPerIP would do the counting, but its wrapper hides
// the socket (syscall.Conn) the client watch peeks at (peekClosed), so
// the server counts on its own listener.
type perIPListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[netip.Addr]int
}

func newPerIPListener(ln net.Listener, max int) *perIPListener {
	return &perIPListener{Listener: ln, max: max, open: map[netip.Addr]int{}}
}

// tooManyConns is the answer to a connection over the cap, written
// before its request is read (so in OpenAI's error shape: the route is
// not known yet).
const tooManyConns = `{"error":{"message":"too many connections from your address (--max-conns-per-ip)","type":"rate_limit_error","param":null,"code":null}}`

// Accept returns the next connection within its address's cap; one over
// it is answered 429 and closed.
func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip, ok := remoteIP(c)
		if !ok {
			return c, nil
		}
		if l.take(ip) {
			return &countedConn{Conn: c, release: func() { l.give(ip) }}, nil
		}
		// A fresh socket's send buffer takes the few bytes at once; the
		// deadline keeps the accept loop safe whatever happens.
		c.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(c, "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: "+
			strconv.Itoa(len(tooManyConns))+"\r\n\r\n"+tooManyConns)
		c.Close()
	}
}

func (l *perIPListener) take(ip netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] >= l.max {
		return false
	}
	l.open[ip]++
	return true
}

func (l *perIPListener) give(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

func remoteIP(c net.Conn) (netip.Addr, bool) {
	tcp, ok := c.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}, false
	}
	ip := tcp.AddrPort().Addr().Unmap()
	return ip, ip.IsValid()
}

// countedConn gives its address's count back once closed, and keeps the
// socket reachable (SyscallConn) and sendfile (ReadFrom).
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.New("http: not a socket")
}

func (c *countedConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}
