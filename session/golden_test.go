package session

import (
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/format-v1 from the current code")

// golden is what the stores in testdata/format-v1 hold: every record type
// once, in a log (log/) and compacted into a snapshot (snapshot/).
type golden struct {
	Convs map[string]goldenConv
	Pins  []string
}

type goldenConv struct {
	Meta  map[string]string
	Items []string
}

func goldenClock() *clock { return &clock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)} }

// writeGolden makes a store using every record type and returns what it
// holds.
func writeGolden(t *testing.T, dir string, compact bool) golden {
	clk := goldenClock()
	s := open(t, dir, Options{Now: clk.now})
	item := func(id, typ, data string) Item { return Item{ID: id, Type: typ, Data: json.RawMessage(data)} }
	a, _, err := s.Create(map[string]string{"topic": "golden"}, []Item{
		item("msg_1", "message", `{"role":"user","content":"hi"}`),
		item("msg_2", "message", `{"role":"assistant","content":"hello"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	s.Append(a.ID, []Item{item("fc_1", "function_call", `{"name":"f"}`), item("fco_1", "function_call_output", `{"output":"42"}`)})
	b, _ := s.Fork(a.ID, "msg_2", map[string]string{"branch": "b"})
	c, _ := s.Fork(a.ID, "", nil)
	gone, _, _ := s.Create(nil, []Item{item("msg_gone", "message", `{}`)})
	s.Delete(gone.ID)
	s.Append(b.ID, []Item{item("rs_1", "reasoning", `{"summary":[]}`), item("fco_1", "function_call_output", `{"output":"42"}`)})
	s.SetMetadata(c.ID, map[string]string{"k": "v"})
	s.DeleteItem(c.ID, "fc_1")
	s.TrimFront(a.ID, 1)
	s.TrimAfter(c.ID, "msg_2")
	s.SetPin(Pin{Key: "pin-a", Model: "m", Tokens: []int32{1, 2, 3}, Expires: clk.t.Add(24 * 365 * 100 * time.Hour)})
	s.SetPin(Pin{Key: "pin-b", Model: "m", Tokens: []int32{4}, Expires: clk.t.Add(24 * 365 * 100 * time.Hour)})
	s.DropPin("pin-b")
	if compact {
		s.mu.Lock()
		v := s.freeze()
		s.mu.Unlock()
		if err := s.compact(v); err != nil {
			t.Fatal(err)
		}
	}
	g := readGolden(t, s, []string{a.ID, b.ID, c.ID})
	s.Close()
	return g
}

func readGolden(t *testing.T, s *Store, convs []string) golden {
	g := golden{Convs: map[string]goldenConv{}}
	for _, id := range convs {
		h, err := s.Get(id)
		if err != nil {
			t.Fatal(err)
		}
		g.Convs[id] = goldenConv{Meta: h.Metadata, Items: ids(mustAll(t, s, id))}
	}
	for _, p := range s.Pins() {
		g.Pins = append(g.Pins, p.Key)
	}
	return g
}

// The on-disk format is kept: stores written by an earlier build (in
// testdata) open to what they held. A change that breaks this needs a
// format version, not a new golden.
func TestFormatV1Opens(t *testing.T) {
	for _, kind := range []string{"log", "snapshot"} {
		src := filepath.Join("testdata", "format-v1", kind)
		if *update {
			os.RemoveAll(src)
			g := writeGolden(t, src, kind == "snapshot")
			os.Remove(filepath.Join(src, "LOCK"))
			b, _ := json.MarshalIndent(g, "", "  ")
			if err := os.WriteFile(filepath.Join(src, "expect.json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var want golden
		b, err := os.ReadFile(filepath.Join(src, "expect.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		entries, _ := os.ReadDir(src)
		for _, e := range entries {
			if e.Name() != "expect.json" {
				b, _ := os.ReadFile(filepath.Join(src, e.Name()))
				os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600)
			}
		}
		s := open(t, dir, Options{Now: goldenClock().now})
		convs := make([]string, 0, len(want.Convs))
		for id := range want.Convs {
			convs = append(convs, id)
		}
		got := readGolden(t, s, convs)
		if st := s.Stats(); st.TornTails != 0 || st.Conversations != 3 || st.Items != 5 {
			t.Errorf("%s: %+v", kind, st)
		}
		s.Close()
		for id, w := range want.Convs {
			g := got.Convs[id]
			if !slices.Equal(g.Items, w.Items) || !maps.Equal(g.Meta, w.Meta) {
				t.Errorf("%s: conversation %s holds %v %v, want %v %v", kind, id, g.Items, g.Meta, w.Items, w.Meta)
			}
		}
		if !slices.Equal(got.Pins, want.Pins) {
			t.Errorf("%s: pins %v, want %v", kind, got.Pins, want.Pins)
		}
	}
}
