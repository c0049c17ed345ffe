package http

import (
	"slices"
	"strings"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/metric"
	"superfluid/session"
)

// recordedPins is a CachePinner that remembers what it was asked.
type recordedPins struct{ got [][]engine.Token }

func (r *recordedPins) Pin(prefix []engine.Token, ttl time.Duration) {
	r.got = append(r.got, slices.Clone(prefix))
}

// A pin a request makes is recorded under the model and pinned again,
// from the record, by a server started on the same store; the memory-only
// pinner records nothing.
func TestPinsOutliveARestart(t *testing.T) {
	dir := t.TempDir()
	store, err := session.Open(dir, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cache := &recordedPins{}
	p := durablePinner{cache: cache, store: store, model: "model-a"}
	p.Pin([]engine.Token{1, 2, 3}, time.Hour)
	p.Pin([]engine.Token{1, 2, 3}, 2*time.Hour) // again: one record
	wire.MemoryPinner(p).Pin([]engine.Token{9, 9}, time.Hour)
	p.Pin([]engine.Token{1, -(1 << 30) - 5, 2}, time.Hour) // over an image: in memory only
	if len(cache.got) != 4 {
		t.Fatalf("the cache got %v", cache.got)
	}
	if pins := store.Pins(); len(pins) != 1 || !slices.Equal(pins[0].Tokens, []int32{1, 2, 3}) || pins[0].Expires.Before(time.Now().Add(time.Hour)) {
		t.Fatalf("recorded %+v", pins)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	store, err = session.Open(dir, session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetSessions(store)
	again := &recordedPins{}
	if n := s.RestorePins(again, "model-b", 100); n != 0 {
		t.Fatalf("another model got %d pins", n)
	}
	if n := s.RestorePins(again, "model-a", 100); n != 1 || !slices.Equal(again.got[0], []engine.Token{1, 2, 3}) {
		t.Fatalf("restored %d: %v", n, again.got)
	}
}

// The budget takes the longest-lived pins first, skipping one that does
// not fit for a smaller that does; expired pins and other models' are
// left.
func TestPinsToRestoreWithinBudget(t *testing.T) {
	now := time.Unix(1000, 0)
	pin := func(key, model string, n int, ttl time.Duration) session.Pin {
		return session.Pin{Key: key, Model: model, Tokens: make([]int32, n), Expires: now.Add(ttl)}
	}
	got := pinsToRestore([]session.Pin{
		pin("short-lived", "m", 4, time.Minute),
		pin("big", "m", 8, 3*time.Hour),
		pin("long-lived", "m", 5, 4*time.Hour),
		pin("expired", "m", 1, -time.Second),
		pin("other", "x", 1, 5*time.Hour),
		pin("small", "m", 3, 2*time.Hour),
	}, "m", 10, now)
	var keys []string
	for _, p := range got {
		keys = append(keys, p.Key)
	}
	if !slices.Equal(keys, []string{"long-lived", "small"}) {
		t.Fatalf("restored %v", keys)
	}
}

// /metrics carries each session store's counters, labelled by store.
func TestSessionMetrics(t *testing.T) {
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	p := metric.NewPage()
	s.addSessionMetrics(p) // no stores: nothing
	var b strings.Builder
	p.WriteTo(&b)
	if strings.Contains(b.String(), "superfluid_session_") {
		t.Fatalf("metrics without a store:\n%s", b.String())
	}
	for _, name := range []string{"conversations", "chains"} {
		st, err := session.Open(t.TempDir(), session.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, _, err := st.Create(nil, nil); err != nil {
			t.Fatal(err)
		}
		if name == "conversations" {
			s.SetSessions(st)
		} else {
			s.SetChains(st)
		}
	}
	p = metric.NewPage()
	s.addSessionMetrics(p)
	b.Reset()
	p.WriteTo(&b)
	for _, want := range []string{`superfluid_session_conversations{store="conversations"} 1`, `superfluid_session_conversations{store="chains"} 1`,
		`superfluid_session_records_total{store="chains"} 1`, `superfluid_session_failed{store="conversations"} 0`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, b.String())
		}
	}
}
