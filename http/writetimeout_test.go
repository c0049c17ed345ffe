package http

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"superfluid/batches"
)

// A client that asks for a stream and then never reads, keeping its socket
// open, loses its lane once the server's writes have made no progress for
// the write timeout: the connection is closed, the generation cancelled
// long before max_tokens, and everyone else is served meanwhile. Long
// pieces fill the socket buffers within a few hundred tokens.
func TestStalledReaderLosesItsLane(t *testing.T) {
	ts := startToy(t, toyOptions{pieceLen: 16 << 10, cfg: Config{WriteTimeout: 300 * time.Millisecond}})
	const maxTokens = 20000
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := fmt.Sprintf(`{"model":"toy","messages":[{"role":"user","content":"go on"}],"max_tokens":%d,"temperature":0,"stream":true}`, maxTokens)
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)

	// Served while the stalled stream holds its lane.
	if status, b := ts.post(t, "/v1/chat/completions", `{"model":"toy","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":false}`); status != 200 {
		t.Fatalf("a request beside the stalled stream: %d %s", status, b)
	}

	deadline := time.Now().Add(30 * time.Second)
	for st := ts.sched.Stats(); st.Cancelled == 0 || st.LanesActive != 0; st = ts.sched.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled stream still holds its lane: %d lanes active, %d cancelled, %d tokens generated",
				st.LanesActive, st.Cancelled, st.DecodeTokens)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := ts.sched.Stats(); st.DecodeTokens >= maxTokens {
		t.Errorf("the stalled stream ran to max_tokens (%d tokens) before it was cancelled", st.DecodeTokens)
	}
	// The server closed the connection: what it had written reads out,
	// then the end.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil {
		t.Errorf("reading the stalled connection out: %v (want the server to have closed it)", err)
	}
	if status, b := ts.post(t, "/v1/chat/completions", `{"model":"toy","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":true}`); status != 200 || !strings.HasSuffix(b, "data: [DONE]\n\n") {
		t.Fatalf("the next stream: %d %s", status, b)
	}
}

// The write timeout bounds a stalled write, never the time between
// events: a stream whose tokens come slower than the timeout, read by its
// client, runs to its end — and the connection serves the next request.
func TestSlowStreamOutlivesWriteTimeout(t *testing.T) {
	ts := startToy(t, toyOptions{step: 250 * time.Millisecond, cfg: Config{WriteTimeout: 100 * time.Millisecond}})
	conn, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := bufio.NewReader(conn)
	for turn := range 2 {
		body := `{"model":"toy","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0,"stream":true}`
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		status, err := r.ReadString('\n')
		if err != nil || !strings.Contains(status, " 200 ") {
			t.Fatalf("turn %d: status line %q (%v)", turn, status, err)
		}
		var events []string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("turn %d: after %d events: %v", turn, len(events), err)
			}
			if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
				events = append(events, v)
				if v == "[DONE]" {
					break
				}
			}
		}
		// The role chunk per choice, three tokens, the finish chunk, [DONE].
		if len(events) != 6 || !strings.Contains(events[4], `"finish_reason":"length"`) {
			t.Fatalf("turn %d: events %q", turn, events)
		}
		// The chunked body's last chunk.
		for line := ""; line != "0\r\n"; {
			if line, err = r.ReadString('\n'); err != nil {
				t.Fatalf("turn %d: the end of the body: %v", turn, err)
			}
		}
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatalf("turn %d: the end of the body: %v", turn, err)
		}
	}
}

// A download that takes longer than the write timeout, read steadily by
// its client, arrives whole: the timeout bounds a write that makes no
// progress, not the transfer (fasthttp's own deadline is set once per
// response).
func TestLongDownloadOutlivesWriteTimeout(t *testing.T) {
	// The timeout is generous beside the reader's pace (a 64 KiB read every
	// 5 ms) so that a busy machine's scheduling hiccups cannot pass for a
	// stalled reader; the download still takes over twice the timeout.
	ts := startToy(t, toyOptions{cfg: Config{WriteTimeout: time.Second}})
	store, err := batches.Open(t.TempDir(), batches.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	data := bytes.Repeat([]byte(`{"custom_id":"x","method":"POST","url":"/v1/chat/completions"}`+"\n"), 32<<20/64)
	f, err := store.CreateFile("big.jsonl", batches.PurposeUserData, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	ts.srv.SetBatches(store)
	resp, err := nethttp.Get(ts.url + "/v1/files/" + f.ID + "/content")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("download: %d", resp.StatusCode)
	}
	// About 12 MB/s: the socket buffers hold a few megabytes, the rest
	// waits on the reader for twice the timeout; a blocked write waits for
	// the reader to free a good part of the send buffer (the kernel wakes
	// a writer only then), a fraction of the timeout at this rate.
	var got bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d of %d bytes: %v", got.Len(), len(data), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("downloaded %d bytes, want the file's %d", got.Len(), len(data))
	}
}
