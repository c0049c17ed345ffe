package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"superfluid/app"
)

// A client that goes away must take its work with it: its lane freed
// within a step, nothing queued on its behalf, no goroutine left waiting
// for it. These tests hang up in the ways real clients do and then read the
// server's own gauges.

// scrapeMetrics reads /metrics into "name{labels}" → value.
func scrapeMetrics(t testing.TB, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// pollUntil retries cond until it holds or bound passes; conditions that
// depend on other goroutines catching up are polled, never slept on.
func pollUntil(t testing.TB, bound time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still not so after %v: %s", bound, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkIdle waits until no lane runs and nothing is queued in any class.
func checkIdle(t testing.TB, base string) {
	t.Helper()
	pollUntil(t, 30*time.Second, func() (bool, string) {
		m := scrapeMetrics(t, base)
		busy := []string{}
		for k, v := range m {
			if (k == "superfluid_lanes_active" || strings.HasPrefix(k, "superfluid_queue_depth{")) && v != 0 {
				busy = append(busy, fmt.Sprintf("%s=%v", k, v))
			}
		}
		if _, ok := m["superfluid_lanes_active"]; !ok {
			return false, "no superfluid_lanes_active gauge"
		}
		return len(busy) == 0, strings.Join(busy, " ")
	})
}

// longStreamBody asks for far more tokens than a disconnecting client will
// read, so that only cancellation can end it early.
func longStreamBody(n int) string {
	return fmt.Sprintf(`{"model":"tiny","messages":[{"role":"user","content":"go on"}],"max_tokens":3000,"temperature":0,"stream":true,"n":%d}`, n)
}

// hangUpRaw opens a socket, asks for a stream, reads until it has seen
// events data lines, and closes the socket — a client killed mid-answer.
func hangUpRaw(addr, body string, events int, deadline time.Time) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(deadline)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.Contains(status, " 200 ") {
		return fmt.Errorf("status line %q", status)
	}
	for seen := 0; seen < events; {
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("after %d events: %w", seen, err)
		}
		if strings.HasPrefix(line, "data: ") {
			seen++
		}
	}
	return nil
}

// hangUpCancel does the same through net/http, abandoning the request by
// cancelling its context — what an SDK does when its caller gives up.
func hangUpCancel(client *http.Client, base, body string, events int, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for seen := 0; seen < events; {
		if !sc.Scan() {
			return fmt.Errorf("after %d events: %v", seen, sc.Err())
		}
		if strings.HasPrefix(sc.Text(), "data: ") {
			seen++
		}
	}
	cancel()
	io.Copy(io.Discard, resp.Body) // returns at once: the context is gone
	return nil
}

// 200 streaming clients read a few events and vanish, eight at a time,
// half closing the socket and half cancelling their request, a quarter
// with two choices. Every one of their generations is cancelled, no lane
// stays busy and no queue holds anything, and the test process is back to
// the goroutines it had before.
func TestDisconnectedStreamsLeaveNothingBehind(t *testing.T) {
	st := startStack(t, app.Options{Ctx: 16384})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	// Warm up both paths once, so that lazily started goroutines (fasthttp's
	// worker pool, the transport's) count in the baseline.
	deadline := time.Now().Add(90 * time.Second) // a bound on the whole test, should cancelling fail
	if err := hangUpRaw(st.Addr().String(), longStreamBody(1), 2, deadline); err != nil {
		t.Fatal(err)
	}
	if err := hangUpCancel(client, st.URL(), longStreamBody(1), 2, deadline); err != nil {
		t.Fatal(err)
	}
	checkIdle(t, st.URL())
	client.CloseIdleConnections()
	before := runtime.NumGoroutine()
	cancelledBefore := scrapeMetrics(t, st.URL())["superfluid_requests_cancelled_total"]

	const total, concurrency = 200, 8
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []string
		choices  int
	)
	jobs := make(chan int)
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				n := 1
				if i%4 == 3 {
					n = 2
				}
				var err error
				if i%2 == 0 {
					err = hangUpRaw(st.Addr().String(), longStreamBody(n), 3, deadline)
				} else {
					err = hangUpCancel(client, st.URL(), longStreamBody(n), 3, deadline)
				}
				mu.Lock()
				choices += n
				if err != nil {
					failures = append(failures, fmt.Sprintf("request %d: %v", i, err))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d clients failed before hanging up: %v", len(failures), failures[:min(5, len(failures))])
	}

	checkIdle(t, st.URL())
	pollUntil(t, 30*time.Second, func() (bool, string) {
		got := scrapeMetrics(t, st.URL())["superfluid_requests_cancelled_total"] - cancelledBefore
		return got == float64(choices), fmt.Sprintf("%v of %d generations cancelled", got, choices)
	})
	// fasthttp keeps up to one idle worker goroutine per concurrent
	// connection for its idle period (10 s); anything beyond that residue
	// is a goroutine some request left behind (200 requests would leave at
	// least 200).
	client.CloseIdleConnections()
	slack := concurrency + 4
	pollUntil(t, 30*time.Second, func() (bool, string) {
		now := runtime.NumGoroutine()
		return now <= before+slack, fmt.Sprintf("%d goroutines, %d before (slack %d)", now, before, slack)
	})
}

// A client waiting for a whole (non-streaming) answer that hangs up is
// noticed by the socket watcher, and its generation is cancelled long
// before it could have finished: the cancelled counter moves, which it
// cannot do if the request runs to its length limit instead.
func TestHungUpWholeRequestIsCancelled(t *testing.T) {
	st := startStack(t, app.Options{Ctx: 16384})
	checkIdle(t, st.URL())
	before := scrapeMetrics(t, st.URL())
	// 12000 tokens take the tiny model well over ten seconds on two cores.
	body := `{"model":"tiny","messages":[{"role":"user","content":"go on"}],"max_tokens":12000,"temperature":0}`
	conn, err := net.Dial("tcp", st.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	pollUntil(t, 30*time.Second, func() (bool, string) {
		m := scrapeMetrics(t, st.URL())
		return m["superfluid_lanes_active"] == 1 && m["superfluid_decode_tokens_total"] > before["superfluid_decode_tokens_total"],
			fmt.Sprintf("lanes %v", m["superfluid_lanes_active"])
	})
	hungUp := time.Now()
	conn.Close()
	pollUntil(t, 30*time.Second, func() (bool, string) {
		m := scrapeMetrics(t, st.URL())
		cancelled := m["superfluid_requests_cancelled_total"] - before["superfluid_requests_cancelled_total"]
		completed := m["superfluid_requests_completed_total"] - before["superfluid_requests_completed_total"]
		if completed > 0 && cancelled == 0 {
			t.Fatalf("the request ran to completion after its client hung up")
		}
		return cancelled == 1, fmt.Sprintf("cancelled %v, completed %v", cancelled, completed)
	})
	t.Logf("cancelled %v after the hang-up", time.Since(hungUp).Round(time.Millisecond))
	checkIdle(t, st.URL())
}
