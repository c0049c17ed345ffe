package session

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// A chain of turns costs the same disk at turn 50 as at turn 1: each turn
// writes its own items once, never the conversation so far.
func TestDiskPerTurnIsFlat(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := open(t, dir, Options{Now: clk.now})
	defer s.Close()
	c, _, err := s.Create(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, walName(1))
	growth := map[int]int64{}
	for turn := 1; turn <= 50; turn++ {
		before := fileSize(t, logPath)
		if _, err := s.Append(c.ID, []Item{msg("a question of fixed size"), msg("an answer of a fixed size")}); err != nil {
			t.Fatal(err)
		}
		growth[turn] = fileSize(t, logPath) - before
	}
	t.Logf("log bytes per turn: turn 1 %d, turn 10 %d, turn 50 %d", growth[1], growth[10], growth[50])
	if growth[10] != growth[1] || growth[50] != growth[1] {
		t.Fatalf("per-turn growth not flat: %v", []int64{growth[1], growth[10], growth[50]})
	}
	f, _ := s.Fork(c.ID, "", nil)
	before := fileSize(t, logPath)
	s.Fork(f.ID, "", nil)
	if fork := fileSize(t, logPath) - before; fork > 200 {
		t.Fatalf("a fork of 100 items wrote %d bytes", fork)
	}
}

func TestCompactionDropsTheDeadAndKeepsTheLive(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	opt := Options{Now: clk.now, CompactBytes: minCompactBytes}
	s := open(t, dir, opt)
	keep, kept, _ := s.Create(map[string]string{"k": "v"}, msgs("keep", 3))
	fork, _ := s.Fork(keep.ID, kept[1].ID, nil)
	s.SetPin(Pin{Key: "p", Model: "m", Tokens: []int32{7}, Expires: clk.t.Add(time.Hour)})
	// Churn past the compaction bound: conversations made and deleted.
	for i := 0; s.Stats().Compactions < 2; i++ {
		c, _, err := s.Create(nil, msgs("churn", 20))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(c.ID); err != nil {
			t.Fatal(err)
		}
		if i > 10000 {
			t.Fatal("never compacted")
		}
	}
	more, _ := s.Append(keep.ID, msgs("after", 1))
	st := s.Stats()
	if st.Items != 4 || st.Conversations != 2 {
		t.Fatalf("live after churn %+v", st)
	}
	if disk := st.LogBytes + st.SnapshotBytes; disk > 2*minCompactBytes {
		t.Fatalf("disk %d after compactions", disk)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "wal-*.log"))
	if len(logs) != 1 {
		t.Fatalf("logs left: %v", logs)
	}
	s.Close()
	s = open(t, dir, opt)
	defer s.Close()
	want := append(slices.Clone(ids(kept)), more[0].ID)
	if got := ids(mustAll(t, s, keep.ID)); !slices.Equal(got, want) {
		t.Fatalf("kept conversation %v, want %v", got, want)
	}
	if got := ids(mustAll(t, s, fork.ID)); !slices.Equal(got, ids(kept[:2])) {
		t.Fatalf("fork %v", got)
	}
	if h, _ := s.Get(keep.ID); h.Metadata["k"] != "v" || h.CreatedAt != clk.t.Unix() {
		t.Fatalf("header %+v", h)
	}
	if len(s.Pins()) != 1 {
		t.Fatal("pin lost in the snapshot")
	}
	if st := s.Stats(); st.Items != 4 || st.TornTails != 0 {
		t.Fatalf("after reopen %+v", st)
	}
}

func TestRetentionEndsIdleConversations(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	opt := Options{Now: clk.now, Retention: time.Hour}
	s := open(t, dir, opt)
	idle, _, _ := s.Create(nil, msgs("idle", 2))
	busy, _, _ := s.Create(nil, msgs("busy", 2))
	clk.t = clk.t.Add(50 * time.Minute)
	s.Append(busy.ID, msgs("more", 1))
	clk.t = clk.t.Add(20 * time.Minute)
	if _, err := s.Get(idle.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("past retention: %v", err)
	}
	if _, err := s.Append(idle.ID, msgs("late", 1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("append past retention: %v", err)
	}
	if _, err := s.Get(busy.ID); err != nil {
		t.Fatalf("written within retention: %v", err)
	}
	s.Close()
	s = open(t, dir, opt)
	defer s.Close()
	st := s.Stats()
	if st.Conversations != 1 || st.Items != 3 || st.Compactions != 1 || st.Expired != 1 {
		t.Fatalf("Open did not drop the idle conversation: %+v", st)
	}
}

func TestDamagedSnapshotIsAnError(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{CompactBytes: minCompactBytes})
	for s.Stats().Compactions == 0 {
		c, _, _ := s.Create(nil, msgs("x", 20))
		s.Delete(c.ID)
	}
	s.Close()
	path := filepath.Join(dir, snapName)
	b, _ := os.ReadFile(path)
	b[len(b)-3] ^= 0x40
	os.WriteFile(path, b, 0o600)
	if _, err := Open(dir, Options{}); err == nil {
		t.Fatal("a damaged snapshot opened")
	}
}

// A snapshot larger than CompactBytes raises the bound to its own size:
// rewriting the live state costs at most a byte per byte of log.
func TestCompactionIsAmortizedOverALargeSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{CompactBytes: minCompactBytes})
	defer s.Close()
	keep, _, _ := s.Create(nil, nil)
	for s.Stats().LiveBytes < 4*minCompactBytes {
		if _, err := s.Append(keep.ID, msgs(strings.Repeat("live ", 40), 10)); err != nil {
			t.Fatal(err)
		}
	}
	for s.Stats().Compactions == 0 || s.Stats().SnapshotBytes < 3*minCompactBytes {
		c, _, _ := s.Create(nil, msgs("churn", 20))
		s.Delete(c.ID)
	}
	before := s.Stats()
	var written int64
	for written < 3*before.SnapshotBytes {
		c, _, _ := s.Create(nil, msgs("churn", 20))
		s.Delete(c.ID)
		written = s.Stats().Bytes - before.Bytes
	}
	after := s.Stats()
	if n := after.Compactions - before.Compactions; n > 4 { // 3 whole periods, and the one already begun
		t.Fatalf("%d compactions of a %d-byte snapshot for %d bytes of log", n, before.SnapshotBytes, written)
	}
	if after.LogBytes > max(minCompactBytes, after.SnapshotBytes)+4096 {
		t.Fatalf("log %d past its bound (snapshot %d)", after.LogBytes, after.SnapshotBytes)
	}
}

// compactOnce fills a store until its first compaction and returns the
// log as it was just before it, and the conversation it kept.
func compactOnce(t *testing.T, dir string) (oldLog []byte, keep string, kept []string) {
	t.Helper()
	s := open(t, dir, Options{CompactBytes: minCompactBytes})
	c, items, _ := s.Create(nil, msgs("keep", 2))
	for {
		b, err := os.ReadFile(filepath.Join(dir, walName(1)))
		if err != nil {
			t.Fatal(err)
		}
		x, _, _ := s.Create(nil, msgs("churn", 20))
		s.Delete(x.ID)
		if s.Stats().Compactions > 0 {
			s.Close()
			return b, c.ID, ids(items)
		}
	}
}

// A crash after the snapshot's rename but before the old log's removal
// leaves that log beside the snapshot: Open reads the snapshot's
// generation only and removes the old log (replaying it again would
// apply its records twice).
func TestOpenIgnoresTheLogASnapshotReplaced(t *testing.T) {
	dir := t.TempDir()
	oldLog, keep, kept := compactOnce(t, dir)
	os.WriteFile(filepath.Join(dir, walName(1)), oldLog, 0o600)
	s := open(t, dir, Options{})
	defer s.Close()
	if got := ids(mustAll(t, s, keep)); !slices.Equal(got, kept) {
		t.Fatalf("kept %v", got)
	}
	if st := s.Stats(); st.Conversations != 1 || st.TornTails != 0 {
		t.Fatalf("%+v", st)
	}
	if _, err := os.Stat(filepath.Join(dir, walName(1))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the replaced log is still there: %v", err)
	}
}

// A crash inside a compaction, before the rename, leaves the next
// generation's log begun and a half-written snapshot.tmp: Open keeps to
// the snapshot and log it had and removes both.
func TestOpenIgnoresAnInterruptedCompaction(t *testing.T) {
	dir := t.TempDir()
	_, keep, kept := compactOnce(t, dir) // now at generation 2
	junk := append(header(logMagic, 3), 1, 2, 3)
	os.WriteFile(filepath.Join(dir, walName(3)), junk, 0o600)
	os.WriteFile(filepath.Join(dir, snapTmpName), append(header(snapMagic, 3), 9, 9), 0o600)
	s := open(t, dir, Options{})
	defer s.Close()
	if got := ids(mustAll(t, s, keep)); !slices.Equal(got, kept) {
		t.Fatalf("kept %v", got)
	}
	for _, name := range []string{walName(3), snapTmpName} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s is still there: %v", name, err)
		}
	}
}

// A conversation that retention drops to make room is dropped by a logged
// delete: a later item reusing one of its ids replays after a restart.
func TestRetentionDropForRoomIsLogged(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	opt := Options{Now: clk.now, Retention: time.Hour, MaxConversations: 1}
	s := open(t, dir, opt)
	fixed := Item{ID: "msg_fixed", Type: "message", Data: []byte(`{"v":1}`)}
	if _, _, err := s.Create(nil, []Item{fixed}); err != nil {
		t.Fatal(err)
	}
	clk.t = clk.t.Add(2 * time.Hour)
	fixed.Data = []byte(`{"v":2}`)
	b, _, err := s.Create(nil, []Item{fixed})
	if err != nil {
		t.Fatalf("no room made for a conversation: %v", err)
	}
	s.Close()
	clk.t = clk.t.Add(-2 * time.Hour) // even where the first would not yet have expired
	s = open(t, dir, opt)
	defer s.Close()
	got, err := s.Item(b.ID, "msg_fixed")
	if err != nil || string(got.Data) != `{"v":2}` {
		t.Fatalf("after restart: %s %v", got.Data, err)
	}
	if st := s.Stats(); st.TornTails != 0 || st.Conversations != 1 {
		t.Fatalf("%+v", st)
	}
}
