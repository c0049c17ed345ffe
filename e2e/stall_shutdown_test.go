package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"superfluid/app"
	sfhttp "superfluid/http"
)

// A shutdown whose drain period runs out stops the scheduler, then closes
// the engine, under requests still generating on the real engine: a
// stream ends with an error event in its API's shape (after nothing but
// well-formed events), a whole request answers 503, and neither renders a
// token once the engine is gone.
func TestShutdownMidGenerationAnswers503(t *testing.T) {
	o := app.Options{ModelPath: tinyModel(t), Alias: "tiny", Threads: 1, Ctx: 16384, Lanes: 2, HTTP: sfhttp.Config{Drain: 50 * time.Millisecond}}
	st, err := app.Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close() // a no-op once the test has closed it

	streamBody := `{"model":"tiny","messages":[{"role":"user","content":"go on"}],"max_tokens":6000,"temperature":0,"stream":true}`
	resp, err := http.Post(st.URL()+"/v1/chat/completions", "application/json", strings.NewReader(streamBody))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var events []string
	for len(events) < 3 && sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, v)
		}
	}
	if len(events) < 3 {
		t.Fatalf("the stream ended before it generated: %v %v", events, sc.Err())
	}

	type answer struct {
		status int
		body   string
		err    error
	}
	whole := make(chan answer, 1)
	go func() {
		resp, err := http.Post(st.URL()+"/api/generate", "application/json",
			strings.NewReader(`{"model":"tiny","prompt":"go on","stream":false,"options":{"num_predict":6000,"temperature":0}}`))
		if err != nil {
			whole <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		whole <- answer{resp.StatusCode, string(b), err}
	}()
	pollUntil(t, 30*time.Second, func() (bool, string) {
		m := scrapeMetrics(t, st.URL())
		return m["superfluid_lanes_active"] == 2, fmt.Sprintf("%v lanes active", m["superfluid_lanes_active"])
	})

	// Close reports the drain's overrun (context.DeadlineExceeded): what
	// this test checks is what the clients got.
	st.Close()
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, v)
		}
	}
	last := events[len(events)-1]
	var ev struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(last), &ev); err != nil || ev.Error.Type != "unavailable_error" || ev.Error.Message == "" {
		t.Fatalf("the stream's last event %q, want OpenAI's error shape with unavailable_error (%v)", last, err)
	}
	for _, e := range events[:len(events)-1] {
		var chunk struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &chunk); err != nil || chunk.Object != "chat.completion.chunk" || len(chunk.Choices) != 1 {
			t.Fatalf("an event before the error: %q (%v)", e, err)
		}
	}
	a := <-whole
	if a.err != nil || a.status != 503 {
		t.Fatalf("the whole request: %d %q (%v), want 503", a.status, a.body, a.err)
	}
	var oe struct {
		Error string `json:"error"`
	}
	if json.Unmarshal([]byte(a.body), &oe) != nil || oe.Error == "" {
		t.Errorf("the whole request's 503 %q is not in Ollama's shape", a.body)
	}
}

// A client that asks for a stream and stops reading, its socket open,
// loses its lanes after --write-timeout: the server closes the connection
// and cancels every choice long before max_tokens, and serves the next
// request. Logprobs make each event large enough to fill the socket
// buffers within a few thousand tokens.
func TestStalledReaderLosesItsLanes(t *testing.T) {
	st := startStack(t, app.Options{Ctx: 16384, HTTP: sfhttp.Config{WriteTimeout: 300 * time.Millisecond}})
	checkIdle(t, st.URL())
	before := scrapeMetrics(t, st.URL())
	const n, maxTokens = 4, 3000
	conn, err := net.Dial("tcp", st.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := fmt.Sprintf(`{"model":"tiny","messages":[{"role":"user","content":"go on"}],"max_tokens":%d,"temperature":0,"stream":true,"n":%d,"logprobs":true,"top_logprobs":20}`, maxTokens, n)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)

	pollUntil(t, 60*time.Second, func() (bool, string) {
		m := scrapeMetrics(t, st.URL())
		cancelled := m["superfluid_requests_cancelled_total"] - before["superfluid_requests_cancelled_total"]
		return cancelled == n && m["superfluid_lanes_active"] == 0,
			fmt.Sprintf("%v of %d choices cancelled, %v lanes active", cancelled, n, m["superfluid_lanes_active"])
	})
	m := scrapeMetrics(t, st.URL())
	got := m["superfluid_decode_tokens_total"] - before["superfluid_decode_tokens_total"]
	if got >= n*maxTokens {
		t.Errorf("%v tokens generated: the stalled stream ran to max_tokens", got)
	}
	t.Logf("%v of at most %d tokens generated before the stalled stream was cancelled", got, n*maxTokens)
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Errorf("reading the stalled connection out: %v (want the server to have closed it)", err)
	}
	resp, err := http.Post(st.URL()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":8,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the next request: %d", resp.StatusCode)
	}
}
