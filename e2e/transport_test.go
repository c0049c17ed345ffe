package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"superfluid/app"
)

// vmRSS is a process's resident memory in bytes, from /proc.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// floodAnswer opens a connection to addr, sends head and one byte of the
// body it announces, and returns the answer's status; the connection
// stays open (the caller closes it) so that the server holds whatever it
// would hold for it.
func floodAnswer(addr, head string) (net.Conn, int, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, 0, err
	}
	// A bound for the test, not the server's: an answer comes at once.
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	if _, err := io.WriteString(conn, head+"{"); err != nil {
		return conn, 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return conn, 0, fmt.Errorf("no answer before the body arrived: %w", err)
	}
	resp.Body.Close()
	if !resp.Close {
		return conn, resp.StatusCode, fmt.Errorf("a refused request with its body unread kept its connection open")
	}
	return conn, resp.StatusCode, nil
}

// 400 connections each announcing a 16 MB body and sending one byte of
// it: without the key each is answered 401 at once, with it each is
// answered 413 (the chat route takes 8 MiB) — neither waits for the body
// nor holds memory for it. The server process's resident memory is read
// while all 400 are open; before the fix fasthttp allocated every
// announced body up front and waited out its 5-minute read timeout
// (+2.6 GB). The real process, so that its RSS is the server's alone.
func TestTransportOversizedFloodHoldsNothing(t *testing.T) {
	p := startServe(t, []string{"SUPERFLUID_THREADS=1", "SUPERFLUID_CTX=4096"},
		"--model", tinyModel(t), "--port", "0", "--park-dir", "off", "--api-key", testAPIKey, "--max-conns-per-ip", "1000")
	u, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	const conns = 400
	for _, wave := range []struct {
		name, key string
		want      int
	}{{"no key", "", 401}, {"with the key", "Authorization: Bearer " + testAPIKey + "\r\n", 413}} {
		before := vmRSS(t, pid)
		head := "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + wave.key + "Content-Length: 16000000\r\n\r\n"
		var (
			mu     sync.Mutex
			open   []net.Conn
			status = map[int]int{}
			errs   []error
			wg     sync.WaitGroup
		)
		for range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				conn, code, err := floodAnswer(u.Host, head)
				mu.Lock()
				defer mu.Unlock()
				if conn != nil {
					open = append(open, conn)
				}
				status[code]++
				if err != nil && len(errs) < 3 {
					errs = append(errs, err)
				}
			}()
		}
		wg.Wait()
		grown := vmRSS(t, pid) - before
		for _, c := range open {
			c.Close()
		}
		if len(errs) > 0 || status[wave.want] != conns {
			t.Fatalf("%s: answers %v, want %d × %d; errors %v", wave.name, status, conns, wave.want, errs)
		}
		// 400 × 16 MB announced; what a connection costs the server is its
		// buffers, a few KiB.
		t.Logf("%s: %d connections, RSS grew %.1f MiB", wave.name, conns, float64(grown)/(1<<20))
		if grown > 64<<20 {
			t.Errorf("%s: the server's RSS grew %.0f MiB for %d refused bodies", wave.name, float64(grown)/(1<<20), conns)
		}
	}
	// The server serves on.
	req, _ := http.NewRequest("GET", p.url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after the flood: %v %v", resp, err)
	}
	resp.Body.Close()
}

// readsToEnd reads conn until the server closes it, and returns what it
// sent; err is set if the test's own bound ran out first.
func readsToEnd(conn net.Conn, bound time.Duration) (string, error) {
	conn.SetReadDeadline(time.Now().Add(bound))
	b, err := io.ReadAll(conn)
	if errors.Is(err, syscall.ECONNRESET) {
		// The server closed it with bytes of ours unread (a slowloris
		// still dripping headers): the kernel answers with a reset. Closed
		// all the same; only the deadline means it is still open.
		err = nil
	}
	return string(b), err
}

// A slowloris — headers dribbled a line at a time, never finished — holds
// its connection only for the header timeout, however steadily it sends;
// so does a connection that never sends a byte. A request refused on its
// headers is answered without waiting for the body it announced.
func TestTransportHeaderTimeout(t *testing.T) {
	o := app.Options{}
	o.HTTP.HeaderTimeout = 300 * time.Millisecond
	o.HTTP.APIKey = testAPIKey
	st := startStack(t, o)
	addr := st.Addr().String()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n")
	stop := make(chan struct{})
	dripped := make(chan int)
	go func() {
		n := 0
		defer func() { dripped <- n }()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if _, err := fmt.Fprintf(conn, "X-Drip-%d: x\r\n", n); err != nil {
					return
				}
				n++
			}
		}
	}()
	got, err := readsToEnd(conn, 30*time.Second)
	close(stop)
	lines := <-dripped
	if err != nil {
		t.Fatalf("the slowloris connection is still open after 30 s (%d header lines sent): %v", lines, err)
	}
	if got != "" && !strings.Contains(got, " 408 ") {
		t.Errorf("the slowloris got %q, want nothing or 408", got)
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := readsToEnd(idle, 30*time.Second); err != nil {
		t.Fatalf("a connection that sent nothing is still open after 30 s: %v", err)
	}

	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	io.WriteString(silent, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 16000000\r\n\r\n")
	got, err = readsToEnd(silent, 30*time.Second)
	if err != nil || !strings.HasPrefix(got, "HTTP/1.1 401 ") {
		t.Fatalf("a keyless request whose body never came: %q, %v", got, err)
	}

	// The server serves on.
	status, body := sendBody(t, "GET", st.URL()+"/v1/models", nil, map[string]string{"Authorization": "Bearer " + testAPIKey})
	if status != 200 {
		t.Fatalf("after: %d %s", status, body)
	}
}

// One address holds at most --max-conns-per-ip connections: the next is
// answered 429 and closed; once one closes, a newcomer is served.
func TestTransportConnsPerIP(t *testing.T) {
	o := app.Options{}
	o.HTTP.MaxConnsPerIP = 4
	st := startStack(t, o)
	addr := st.Addr().String()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range 4 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		// A request answered keeps the connection (keep-alive): held.
		fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v %v", len(held), resp, err)
		}
		resp.Body.Close()
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	got, err := readsToEnd(extra, 30*time.Second)
	if err != nil || !strings.HasPrefix(got, "HTTP/1.1 429 ") || !strings.Contains(got, "max-conns-per-ip") {
		t.Fatalf("the fifth connection: %q, %v", got, err)
	}
	held[0].Close()
	held = held[1:]
	// The server counts the closed one off when it notices; a newcomer
	// is served then (the bound is the test's).
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body, err := tryGet(st.URL() + "/health")
		if err == nil && status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no connection served after one of the four closed: %d %s %v", status, body, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tryGet is one GET on a fresh connection.
func tryGet(u string) (int, string, error) {
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}
