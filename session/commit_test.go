package session

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Writers that arrive while a group's fsync runs share the next one: the
// committer is held inside its first write until sixteen more appends are
// queued, and they go out as one group.
func TestGroupCommitBatchesWaitingWriters(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	defer s.Close()
	c, _, err := s.Create(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := s.Stats()
	entered := make(chan struct{}, 64)
	gate := make(chan struct{})
	s.mu.Lock()
	s.beforeWrite = func() { entered <- struct{}{}; <-gate }
	s.mu.Unlock()

	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := s.Append(c.ID, msgs("first", 1)); err != nil {
			t.Error(err)
		}
	})
	<-entered // the first group is inside its write
	const waiting = 16
	for i := range waiting {
		wg.Go(func() {
			if _, err := s.Append(c.ID, msgs(fmt.Sprint("waiting ", i), 1)); err != nil {
				t.Error(err)
			}
		})
	}
	for queued := 0; queued < waiting; runtime.Gosched() {
		s.mu.Lock()
		queued = s.pendingRecs
		s.mu.Unlock()
	}
	close(gate)
	wg.Wait()
	st := s.Stats()
	if groups := st.Groups - base.Groups; groups != 2 {
		t.Fatalf("%d groups for 1+%d appends", groups, waiting)
	}
	if st.MaxGroup != waiting || st.GroupSizes[groupBucket(waiting)] != 1 || st.Records-base.Records != waiting+1 {
		t.Fatalf("group sizes %+v", st)
	}
	if got := len(mustAll(t, s, c.ID)); got != waiting+1 {
		t.Fatalf("%d items", got)
	}
}

// Concurrent writers over several conversations (run it with -race): each
// writer's items stay in its order, and all of them survive a reopen.
func TestConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{CompactBytes: minCompactBytes})
	const convs, writers, each = 3, 8, 40
	var cs [convs]string
	for i := range cs {
		c, _, err := s.Create(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c.ID
	}
	acked := make([][]string, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for k := range each {
				items, err := s.Append(cs[w%convs], msgs(fmt.Sprintf("w%d k%d", w, k), 1))
				if err != nil {
					t.Error(err)
					return
				}
				acked[w] = append(acked[w], items[0].ID)
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	t.Logf("%d records in %d group commits (largest %d), %d compactions", st.Records, st.Groups, st.MaxGroup, st.Compactions)
	s.Close()
	s = open(t, dir, Options{})
	defer s.Close()
	for w := range writers {
		pos := map[string]int{}
		for i, it := range mustAll(t, s, cs[w%convs]) {
			pos[it.ID] = i
		}
		last := -1
		for _, id := range acked[w] {
			p, ok := pos[id]
			if !ok || p <= last {
				t.Fatalf("writer %d: item %s missing or out of order", w, id)
			}
			last = p
		}
	}
	if got := s.Stats().Items; got != writers*each {
		t.Fatalf("%d items stored, want %d", got, writers*each)
	}
}

// A write that fails stops the store's writes: the failed append is not
// acknowledged, nor anything after it, and a reopen finds the store as it
// was before it.
func TestAFailedWriteStopsWrites(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	c, kept, err := s.Create(nil, msgs("kept", 1))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.beforeWrite = func() { s.log.Close() } // the next write fails
	s.mu.Unlock()
	if _, err := s.Append(c.ID, msgs("lost", 1)); err == nil {
		t.Fatal("an append over a closed log was acknowledged")
	}
	if _, err := s.Append(c.ID, msgs("after", 1)); err == nil || !strings.Contains(err.Error(), "failed earlier") {
		t.Fatalf("a write after the failure: %v", err)
	}
	if s.Stats().Failed == "" {
		t.Fatal("Stats does not say the store failed")
	}
	s.Close()
	s = open(t, dir, Options{})
	defer s.Close()
	if got := ids(mustAll(t, s, c.ID)); !slices.Equal(got, ids(kept)) {
		t.Fatalf("after reopen %v", got)
	}
}
