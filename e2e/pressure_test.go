package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"superfluid/app"
	"superfluid/pressure"
)

// postClass posts a llama.cpp body in a class; safe off the test's
// goroutine (it reports instead of failing).
func postClass(url, class, body string) (int, []byte, error) {
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Superfluid-Class", class)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// The memory-pressure watch on a real serve, driven through its testing
// hook (the level read from a file this test writes): at critical, the
// decoding background request is parked to disk and waits, a second
// background request is not admitted, a chat still runs; when the
// pressure clears, both resume — the parked one restored warm from disk —
// and the parked one's greedy output is the output of a run never parked
// (up to a near-tie, as any two batch compositions may round).
func TestCriticalPressureParksBackgroundWorkAndResumesItWarm(t *testing.T) {
	level := filepath.Join(t.TempDir(), "pressure")
	setLevel := func(s string) {
		if err := os.WriteFile(level, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setLevel("none")
	st := startStack(t, app.Options{Lanes: 2, ParkDir: t.TempDir(),
		Pressure: app.PressureOptions{Monitor: pressure.Config{Source: pressure.File(level), Interval: 20 * time.Millisecond, Calm: 1}}})
	metrics := func() map[string]float64 { return scrapeMetrics(t, st.URL()) }

	body := jsonBody(map[string]any{"prompt": "The parked conversation begins with a few words of its own, and", "n_predict": 1000,
		"ignore_eos": true, "temperature": 0, "n_probs": 2})
	type answer struct {
		status int
		body   []byte
		err    error
	}
	parkedDone := make(chan answer, 1)
	go func() {
		s, b, err := postClass(st.URL()+"/completion", "background", body)
		parkedDone <- answer{s, b, err}
	}()
	pollUntil(t, time.Minute, func() (bool, string) {
		m := metrics()
		return m["superfluid_decode_tokens_total"] >= 16, fmt.Sprintf("%v tokens decoded", m["superfluid_decode_tokens_total"])
	})
	setLevel("critical")
	pollUntil(t, time.Minute, func() (bool, string) {
		m := metrics()
		return m["superfluid_pressure_parked_lanes_total"] == 1 && m["superfluid_lanes_active"] == 0,
			fmt.Sprintf("parked %v, lanes %v, level %v", m["superfluid_pressure_parked_lanes_total"], m["superfluid_lanes_active"], m["superfluid_pressure_level"])
	})
	late := make(chan answer, 1)
	go func() {
		s, b, err := postClass(st.URL()+"/completion", "background", jsonBody(map[string]any{"prompt": "A later batch job", "n_predict": 8, "temperature": 0}))
		late <- answer{s, b, err}
	}()
	// A chat runs at critical pressure.
	if s, b, err := postClass(st.URL()+"/completion", "chat", jsonBody(map[string]any{"prompt": "Hello", "n_predict": 8, "temperature": 0})); err != nil || s != 200 {
		t.Fatalf("chat at critical pressure: %d %s %v", s, b, err)
	}
	pollUntil(t, time.Minute, func() (bool, string) {
		m := metrics()
		q := m[`superfluid_queue_depth{class="background"}`]
		return q == 2, fmt.Sprintf("%v background requests queued", q)
	})
	m := metrics()
	if m["superfluid_lanes_active"] != 0 || m["superfluid_pressure_level"] != 2 || m[`superfluid_pressure_transitions_total{to="critical"}`] != 1 {
		t.Fatalf("at critical: lanes %v, level %v, transitions %v", m["superfluid_lanes_active"], m["superfluid_pressure_level"], m[`superfluid_pressure_transitions_total{to="critical"}`])
	}
	if m["superfluid_pressure_evicted_bytes_total"] <= 0 {
		t.Fatal("the parked lane's stream left no bytes counted out of the pool")
	}
	restoresBefore := m["superfluid_park_restores_total"]

	setLevel("none")
	got := <-parkedDone
	if got.err != nil || got.status != 200 {
		t.Fatalf("the parked request: %d %s %v", got.status, got.body, got.err)
	}
	if l := <-late; l.err != nil || l.status != 200 {
		t.Fatalf("the background request that waited: %d %s %v", l.status, l.body, l.err)
	}
	m = metrics()
	if m["superfluid_park_restores_total"] <= restoresBefore || m[`superfluid_pressure_transitions_total{to="none"}`] != 1 {
		t.Fatalf("after the pressure cleared: %v restores (were %v), %v transitions to none", m["superfluid_park_restores_total"], restoresBefore, m[`superfluid_pressure_transitions_total{to="none"}`])
	}
	var parked specCompletion
	if err := json.Unmarshal(got.body, &parked); err != nil {
		t.Fatal(err)
	}
	// The same request again, never parked.
	plain := llamaDo[specCompletion](t, st, "/completion", body)
	if len(parked.Probs) != 1000 || len(plain.Probs) != 1000 {
		t.Fatalf("%d and %d tokens, want 1000 each", len(parked.Probs), len(plain.Probs))
	}
	if j, ok := sameUpToATie(parked, plain); !ok {
		t.Fatalf("the parked run differs from a plain one at token %d:\nparked %q\nplain  %q", j, parked.Content, plain.Content)
	} else if j >= 0 {
		t.Logf("the runs part at token %d, a near-tie", j)
	}
}

// At a warning, host memory is evicted down to its low mark (70% of
// --host-cache), the evicted conversations parked to disk, and nothing
// more is exported to it until the pressure clears.
func TestPressureWarningEmptiesHostMemoryToItsLowMark(t *testing.T) {
	level := filepath.Join(t.TempDir(), "pressure")
	setLevel := func(s string) {
		if err := os.WriteFile(level, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	setLevel("none")
	const hostCache = 64_000 // two of these conversations exported (28 kB each)
	st := startStack(t, app.Options{Lanes: 1, ParkDir: t.TempDir(), HostCache: hostCache,
		Pressure: app.PressureOptions{Monitor: pressure.Config{Source: pressure.File(level), Interval: 20 * time.Millisecond, Calm: 1}}})
	metrics := func() map[string]float64 { return scrapeMetrics(t, st.URL()) }
	conversation := func(i int) {
		prompt := strings.Repeat(fmt.Sprintf("conversation %d says something. ", i), 10)
		llamaDo[specCompletion](t, st, "/completion", jsonBody(map[string]any{"prompt": prompt, "n_predict": 4, "temperature": 0}))
	}
	for i := range 4 {
		conversation(i)
	}
	before := metrics()["superfluid_cache_host_bytes"]
	if before <= hostCache*70/100 {
		t.Fatalf("host memory holds %v bytes before the warning; the test needs more than the low mark %d", before, hostCache*70/100)
	}
	setLevel("warning")
	pollUntil(t, time.Minute, func() (bool, string) {
		m := metrics()
		return m["superfluid_pressure_level"] == 1 && m["superfluid_cache_host_bytes"] <= hostCache*70/100,
			fmt.Sprintf("level %v, host bytes %v", m["superfluid_pressure_level"], m["superfluid_cache_host_bytes"])
	})
	m := metrics()
	if ev := m["superfluid_pressure_evicted_bytes_total"]; ev != before-m["superfluid_cache_host_bytes"] {
		t.Fatalf("%v bytes counted evicted, host memory went from %v to %v", ev, before, m["superfluid_cache_host_bytes"])
	}
	held := m["superfluid_cache_host_bytes"]
	for i := 10; i < 13; i++ {
		conversation(i)
	}
	if got := metrics()["superfluid_cache_host_bytes"]; got > held {
		t.Fatalf("host memory grew from %v to %v bytes during the warning", held, got)
	}
	setLevel("none")
	pollUntil(t, time.Minute, func() (bool, string) {
		lv := metrics()["superfluid_pressure_level"]
		return lv == 0, fmt.Sprintf("level %v", lv)
	})
	for i := 20; i < 23; i++ {
		conversation(i)
	}
	if got := metrics()["superfluid_cache_host_bytes"]; got <= held {
		t.Fatalf("host memory did not take conversations again after the warning: %v bytes (held %v)", got, held)
	}
}
