package session

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// clock is a test's time: it moves only when the test says.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

func open(t testing.TB, dir string, opt Options) *Store {
	t.Helper()
	s, err := Open(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func msg(text string) Item {
	d, _ := json.Marshal(map[string]any{"type": "message", "role": "user", "content": text})
	return Item{Type: "message", Data: d}
}

func msgs(prefix string, n int) []Item {
	out := make([]Item, n)
	for i := range out {
		out[i] = msg(fmt.Sprintf("%s %d", prefix, i))
	}
	return out
}

func ids(items []Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

func mustAll(t *testing.T, s *Store, conv string) []Item {
	t.Helper()
	items, err := s.All(conv)
	if err != nil {
		t.Fatal(err)
	}
	return items
}
