package session

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// logWithThreeAppends writes a conversation and three single appends; it
// returns the log's bytes, the offset where the last record starts, the
// conversation and the appended item ids in order.
func logWithThreeAppends(t testing.TB, dir string) ([]byte, int, string, []string) {
	t.Helper()
	clk := newClock()
	s := open(t, dir, Options{Now: clk.now})
	c, _, err := s.Create(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var appended []string
	var lastStart int64
	for i := 0; i < 3; i++ {
		lastStart = s.Stats().LogBytes
		items, err := s.Append(c.ID, msgs("turn", 1))
		if err != nil {
			t.Fatal(err)
		}
		appended = append(appended, items[0].ID)
	}
	s.Close()
	b, err := os.ReadFile(filepath.Join(dir, walName(1)))
	if err != nil {
		t.Fatal(err)
	}
	return b, int(lastStart), c.ID, appended
}

func writeLog(t *testing.T, dir string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, walName(1)), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Cut the log at every byte of its last record: the record is gone, the
// ones before it whole, the tail counted, and the store writes on.
func TestTornTailAtEveryOffset(t *testing.T) {
	src := t.TempDir()
	whole, last, conv, appended := logWithThreeAppends(t, src)
	for cut := last; cut < len(whole); cut++ {
		dir := t.TempDir()
		writeLog(t, dir, whole[:cut])
		s := open(t, dir, Options{})
		if got := ids(mustAll(t, s, conv)); !slices.Equal(got, appended[:2]) {
			t.Fatalf("cut at %d: items %v", cut, got)
		}
		st := s.Stats()
		wantTorn := int64(0)
		if cut > last {
			wantTorn = 1
		}
		if st.TornTails != wantTorn || st.TornBytes != int64(cut-last) || st.LogBytes != int64(last) {
			t.Fatalf("cut at %d: %+v", cut, st)
		}
		more, err := s.Append(conv, msgs("after", 1))
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = open(t, dir, Options{})
		if got := ids(mustAll(t, s, conv)); !slices.Equal(got, append(slices.Clone(appended[:2]), more[0].ID)) {
			t.Fatalf("cut at %d, then an append: %v", cut, got)
		}
		if s.Stats().TornTails != 0 {
			t.Fatalf("cut at %d: the truncated log is torn again", cut)
		}
		s.Close()
	}
}

// Flip any one byte of a record: that record and every one after it are
// not applied, the ones before are.
func TestFlippedByteDropsTheRecordAndWhatFollows(t *testing.T) {
	src := t.TempDir()
	whole, last, conv, appended := logWithThreeAppends(t, src)
	// The second append's record spans [second, last).
	second := last - (len(whole) - last)
	for off := second; off < len(whole); off++ {
		dir := t.TempDir()
		b := slices.Clone(whole)
		b[off] ^= 0x20
		writeLog(t, dir, b)
		s := open(t, dir, Options{})
		want := appended[:2]
		if off < last {
			want = appended[:1]
		}
		if got := ids(mustAll(t, s, conv)); !slices.Equal(got, want) {
			t.Fatalf("byte %d flipped: items %v, want %v", off, got, want)
		}
		if s.Stats().TornTails != 1 {
			t.Fatalf("byte %d flipped: not counted", off)
		}
		s.Close()
	}
}

func TestTornHeaderBeginsTheLogAgain(t *testing.T) {
	for _, n := range []int{0, 3, headerLen - 1} {
		dir := t.TempDir()
		writeLog(t, dir, header(logMagic, 1)[:n])
		s := open(t, dir, Options{})
		c, _, err := s.Create(nil, msgs("x", 1))
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		s = open(t, dir, Options{})
		if _, err := s.Get(c.ID); err != nil {
			t.Fatalf("header cut at %d: %v", n, err)
		}
		s.Close()
	}
}

func TestSecondOpenOfOneDirectoryIsRefused(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	defer s.Close()
	if s2, err := Open(dir, Options{}); err == nil {
		s2.Close()
		t.Fatal("two stores over one directory")
	}
}
