package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"superfluid/app"
	"superfluid/bench"
)

// `superfluid bench --scenario soak` for 20 s against the real server
// process on the tiny model at the CPU defaults (--batch 64): every API,
// every class, streams, n > 1, hang-ups mid-prefill and mid-decode, slow
// readers and the poison values. The server is a separate process, so a
// crash is the soak's finding rather than the end of this test binary;
// its --pid gives the soak the server's resident memory.
func TestSoakServeProcess(t *testing.T) {
	p := startServe(t, []string{"SUPERFLUID_THREADS=1"}, "--model", tinyModel(t), "--port", "0", "--alias", "tiny",
		"--lanes", "4", "--ctx", "4096", "--park-dir", "off", "--data-dir", "off", "--drain", "5s")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	rep, err := bench.Run(ctx, bench.Config{URL: p.url, Scenario: bench.Soak, Concurrency: 8, Duration: 20 * time.Second,
		MaxTokens: 16, PromptTokens: 128, Timeout: time.Minute, Seed: 1, PID: p.cmd.Process.Pid})
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, p.stderr)
	}
	out, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("soak report:\n%s", out)
	s := rep.Soak
	select {
	case <-p.exited:
		t.Fatalf("the server exited during the soak (%v):\n%s", p.err, tail(p.stderr.String(), 40))
	default:
	}
	if !s.ServerAlive {
		t.Fatalf("the server went away %vs in (%s):\n%s", *s.DownAfterS, s.DownReason, tail(p.stderr.String(), 40))
	}
	if s.Undocumented5xx > 0 {
		t.Errorf("%d undocumented 5xx; first failures: %+v", s.Undocumented5xx, s.Repro)
	}
	if s.LanesIdle == nil || !*s.LanesIdle {
		t.Errorf("lanes not idle after the soak: %s", s.LanesAfter)
	}
	if s.Broken > 0 || s.UnexpectedRefusals > 0 {
		t.Errorf("%d broken answers, %d well-formed requests refused; first failures: %+v", s.Broken, s.UnexpectedRefusals, s.Repro)
	}
	if s.Sent < 50 || len(s.Skipped) > 0 {
		t.Errorf("the soak sent %d requests, skipping %v: it did not exercise the server", s.Sent, s.Skipped)
	}
	if s.RSS == nil || s.RSS.Samples == 0 {
		t.Errorf("no resident-memory sample from --pid: %+v", s.RSS)
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// The same soak, shorter, against the stack in this process: afterwards no
// goroutine of ours is left behind for a request that ended (a hang-up, a
// slow reader, a refused poison), while the stack itself still runs.
func TestSoakLeavesNoGoroutines(t *testing.T) {
	st := startStack(t, app.Options{Batch: 64})
	before := goroutineIDs()
	rep, err := bench.Run(context.Background(), bench.Config{URL: st.URL(), Scenario: bench.Soak, Concurrency: 8, Duration: 8 * time.Second,
		MaxTokens: 16, PromptTokens: 128, Timeout: time.Minute, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	if s := rep.Soak; !s.ServerAlive || s.Undocumented5xx+s.Broken+s.UnexpectedRefusals > 0 || s.LanesIdle == nil || !*s.LanesIdle {
		t.Errorf("soak problems %v; first failures %+v", s.Problems, s.Repro)
	}
	if leaked := leakedGoroutines(before); len(leaked) > 0 {
		t.Errorf("%d goroutines left after the soak:\n%s", len(leaked), strings.Join(leaked, "\n\n"))
	}
}
