package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"superfluid/app"
	"superfluid/status"
)

// statusLoadBody is a chat stream long enough to watch (the tiny model
// decodes thousands of tokens a second); the tests end it by hanging up.
const statusLoadBody = `{"model":"tiny","messages":[{"role":"user","content":"go on"}],"max_tokens":12000,"temperature":0,"stream":true}`

// The live status on a real server: a streamed chat shows as a busy lane
// of its class and API, in GET /v1/status and in the event stream, and
// once the client hangs up the lane shows idle in both. Event streams
// that clients close leave no goroutine behind.
func TestStatusShowsALaneBusyThenIdle(t *testing.T) {
	st := startStack(t, app.Options{Ctx: 16384, Lanes: 2})
	c := &status.Client{URL: st.URL()}
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	first, err := c.Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Models) != 1 || first.Models[0].Lanes != 2 || len(first.Lanes) != 2 || len(first.Queues) != 4 {
		t.Fatalf("an idle server: %+v", first)
	}
	if busy, _ := first.BusyLanes(""); busy != 0 {
		t.Fatalf("%d lanes busy before any request", busy)
	}

	// The event stream, read on its own goroutine.
	evctx, stopEvents := context.WithCancel(context.Background())
	defer stopEvents()
	events := make(chan *status.Status, 1024)
	followed := make(chan error, 1)
	go func() {
		followed <- c.Follow(evctx, func(s *status.Status) {
			select {
			case events <- s:
			default:
			}
		})
	}()

	// A long chat stream, read until it has produced, then held open.
	ctx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	req, _ := http.NewRequestWithContext(ctx, "POST", st.URL()+"/v1/chat/completions", strings.NewReader(statusLoadBody))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for seen := 0; seen < 3; {
		if !sc.Scan() {
			t.Fatalf("the stream ended after %d events: %v", seen, sc.Err())
		}
		if strings.HasPrefix(sc.Text(), "data: ") {
			seen++
		}
	}
	busyLane := func(s *status.Status) (status.Lane, bool) {
		for _, l := range s.Lanes {
			if l.Busy() {
				return l, true
			}
		}
		return status.Lane{}, false
	}
	now, err := c.Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	l, ok := busyLane(now)
	if !ok {
		t.Fatalf("no busy lane while a chat streams: %+v", now.Lanes)
	}
	if l.Phase != status.PhaseDecode || l.Class != "chat" || l.API != "openai" || l.PromptTokens == 0 || l.GeneratedTokens < 1 || l.Model != now.Models[0].Name {
		t.Errorf("the chat's lane: %+v", l)
	}
	if m := now.Models[0]; m.LanesBusy != 1 || m.PromptTokens == 0 || m.GeneratedTokens == 0 {
		t.Errorf("the model while busy: %+v", m)
	}
	waitEvent := func(what string, ok func(*status.Status) bool) {
		t.Helper()
		deadline := time.After(60 * time.Second) // a bound on a stuck stream, not a speed
		for {
			select {
			case s := <-events:
				if ok(s) {
					return
				}
			case err := <-followed:
				t.Fatalf("the event stream ended: %v", err)
			case <-deadline:
				t.Fatalf("no event with %s", what)
			}
		}
	}
	waitEvent("a busy lane", func(s *status.Status) bool { _, busy := busyLane(s); return busy })

	hangUp()
	resp.Body.Close()
	pollUntil(t, 30*time.Second, func() (bool, string) {
		s, err := c.Fetch(context.Background())
		if err != nil {
			return false, err.Error()
		}
		l, busy := busyLane(s)
		return !busy, fmt.Sprintf("%+v", l)
	})
	waitEvent("every lane idle", func(s *status.Status) bool { _, busy := busyLane(s); return !busy })
	stopEvents()
	if err := <-followed; err != nil {
		t.Fatalf("following ended with %v", err)
	}

	// Streams closed by their clients end on the server too.
	base := runtime.NumGoroutine()
	for range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		got := make(chan struct{}, 1)
		done := make(chan error, 1)
		go func() {
			done <- c.Follow(ctx, func(*status.Status) {
				select {
				case got <- struct{}{}:
				default:
				}
			})
		}()
		<-got
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	pollUntil(t, 30*time.Second, func() (bool, string) {
		n := runtime.NumGoroutine()
		return n <= base+2, fmt.Sprintf("%d goroutines, %d before the streams", n, base)
	})
}

// A status route refuses what it does not take, in OpenAI's shape.
func TestStatusRefusesQueryParameters(t *testing.T) {
	st := startStack(t, app.Options{})
	for _, path := range []string{"/v1/status?model=tiny", "/v1/status/events?x"} {
		code, b := sendBody(t, "GET", st.URL()+path, nil, nil)
		expectError(t, "openai", code, 400, b, func(apiErrorBody) string { return "" })
	}
	if code, b := sendBody(t, "POST", st.URL()+"/v1/status", []byte(`{}`), nil); code != 405 {
		t.Errorf("POST /v1/status: %d %s", code, b)
	}
}

// superfluid top in a terminal: tmux runs it at a fixed size against a
// server under load; the screen shows the model and its busy lanes, and q
// ends it.
func TestTopInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed: top's terminal test needs it")
	}
	bin := superfluidBinary(t)
	st := startStack(t, app.Options{Ctx: 16384, Lanes: 2})
	// Load: two long streams, held open until the test ends.
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		go func() {
			for ctx.Err() == nil { // one long stream after another until the test ends
				req, _ := http.NewRequestWithContext(ctx, "POST", st.URL()+"/v1/chat/completions", strings.NewReader(statusLoadBody))
				req.Header.Set("Content-Type", "application/json")
				if resp, err := client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	sock := fmt.Sprintf("sf-top-%d", time.Now().UnixNano())
	tmux := func(args ...string) (string, error) {
		out, err := exec.Command("tmux", append([]string{"-L", sock}, args...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() { tmux("kill-server") })
	if out, err := tmux("new-session", "-d", "-s", "top", "-x", "150", "-y", "45", bin, "top", "--url", st.URL()); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	screen := ""
	pollUntil(t, 60*time.Second, func() (bool, string) {
		out, err := tmux("capture-pane", "-p", "-t", "top")
		if err != nil {
			return false, err.Error() + out
		}
		screen = out
		decoding := 0
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, " decode ") && strings.Contains(line, "chat") {
				decoding++
			}
		}
		return decoding == 2 && strings.Contains(out, "lanes 2/2 busy") && strings.Contains(out, "QUEUES") &&
			strings.Contains(out, "TOKENS/S"), out
	})
	t.Logf("top under load:\n%s", screen)
	// A smaller terminal: the view redraws to its width.
	if out, err := tmux("resize-window", "-t", "top", "-x", "60", "-y", "30"); err != nil {
		t.Fatalf("resize-window: %v %s", err, out)
	}
	pollUntil(t, 30*time.Second, func() (bool, string) {
		out, err := tmux("capture-pane", "-p", "-t", "top")
		if err != nil {
			return false, err.Error() + out
		}
		cut := false
		for _, line := range strings.Split(out, "\n") {
			if utf8.RuneCountInString(line) > 60 {
				return false, "a line wider than the terminal:\n" + out
			}
			cut = cut || strings.HasSuffix(strings.TrimRight(line, " "), "…")
		}
		return cut && strings.Contains(out, "LANES"), out
	})
	if out, err := tmux("send-keys", "-t", "top", "q"); err != nil {
		t.Fatalf("send-keys: %v %s", err, out)
	}
	pollUntil(t, 30*time.Second, func() (bool, string) {
		_, err := tmux("has-session", "-t", "top")
		return err != nil, "top still runs after q"
	})
}

// superfluid ps against a server that wants a key: refused without it,
// the loaded model's row with it, and --json the whole status.
func TestPSCommand(t *testing.T) {
	bin := superfluidBinary(t)
	o := app.Options{Lanes: 3}
	o.HTTP.APIKey = testAPIKey
	st := startStack(t, o)
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"ps", "--url", st.URL()}, args...)...)
		cmd.Env = []string{"HOME=" + t.TempDir()} // no SUPERFLUID_API_KEY from the caller's environment
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run(); err == nil || !strings.Contains(out, "401") {
		t.Fatalf("without the key: %v %s", err, out)
	}
	out, err := run("--api-key", testAPIKey)
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "LANES") || !strings.Contains(lines[0], "CACHE") {
		t.Fatalf("ps:\n%s", out)
	}
	if f := strings.Fields(lines[1]); f[0] != "tiny" || !strings.Contains(lines[1], "100% CPU") || !strings.Contains(lines[1], "Forever") || !strings.Contains(lines[1], " 0/3 ") {
		t.Fatalf("ps row: %q", lines[1])
	}
	out, err = run("--api-key", testAPIKey, "--json")
	var s status.Status
	if err != nil || json.Unmarshal([]byte(out), &s) != nil || len(s.Models) != 1 || len(s.Lanes) != 3 {
		t.Fatalf("ps --json: %v %s", err, out)
	}
}
