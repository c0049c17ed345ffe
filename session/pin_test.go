package session

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestPinsOutliveARestartUntilTheyExpire(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	opt := Options{Now: clk.now}
	s := open(t, dir, opt)
	long := Pin{Key: "a", Model: "m", Tokens: []int32{1, 2, 3}, Expires: clk.t.Add(time.Hour)}
	short := Pin{Key: "b", Model: "m", Tokens: []int32{4}, Expires: clk.t.Add(time.Minute)}
	for _, p := range []Pin{long, short} {
		if err := s.SetPin(p); err != nil {
			t.Fatal(err)
		}
	}
	replaced := long
	replaced.Tokens = []int32{9, 9}
	if err := s.SetPin(replaced); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPin(Pin{Key: "c", Model: "m", Tokens: []int32{1}, Expires: clk.t}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a pin already expired: %v", err)
	}
	if err := s.SetPin(Pin{Key: "far", Model: "m", Tokens: []int32{1}, Expires: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an expiry past what the log holds: %v", err)
	}
	for _, bad := range []Pin{{Model: "m", Tokens: []int32{1}}, {Key: "k", Tokens: []int32{1}}, {Key: "k", Model: "m"}, {Key: "k", Model: "m", Tokens: []int32{-1}}} {
		bad.Expires = clk.t.Add(time.Hour)
		if err := s.SetPin(bad); !errors.Is(err, ErrInvalid) {
			t.Fatalf("pin %+v: %v", bad, err)
		}
	}
	s.Close()
	s = open(t, dir, opt)
	got := s.Pins()
	if len(got) != 2 || got[0].Key != "a" || !slices.Equal(got[0].Tokens, []int32{9, 9}) || !got[0].Expires.Equal(long.Expires) || got[1].Key != "b" {
		t.Fatalf("pins after restart %+v", got)
	}
	clk.t = clk.t.Add(2 * time.Minute)
	if got := s.Pins(); len(got) != 1 || got[0].Key != "a" {
		t.Fatalf("an expired pin is still listed: %+v", got)
	}
	if err := s.DropPin("a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DropPin("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("dropped twice: %v", err)
	}
	s.Close()
	s = open(t, dir, opt)
	defer s.Close()
	if got := s.Pins(); len(got) != 0 {
		t.Fatalf("pins after drop and expiry %+v", got)
	}
	if st := s.Stats(); st.Pins != 0 {
		t.Fatalf("an expired pin was kept at Open: %+v", st)
	}
}

func TestPinBudget(t *testing.T) {
	clk := newClock()
	s := open(t, t.TempDir(), Options{Now: clk.now, MaxPins: 2})
	defer s.Close()
	p := func(k string) Pin {
		return Pin{Key: k, Model: "m", Tokens: []int32{1}, Expires: clk.t.Add(time.Minute)}
	}
	s.SetPin(p("a"))
	s.SetPin(p("b"))
	if err := s.SetPin(p("c")); !errors.Is(err, ErrQuota) {
		t.Fatalf("past the pin budget: %v", err)
	}
	if err := s.SetPin(p("a")); err != nil {
		t.Fatalf("replacing within the budget: %v", err)
	}
	clk.t = clk.t.Add(time.Hour)
	if err := s.SetPin(p("c")); err != nil {
		t.Fatalf("expired pins still count: %v", err)
	}
}
