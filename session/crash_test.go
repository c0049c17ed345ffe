package session

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const crashEnv = "SUPERFLUID_SESSION_CRASH_DIR"

// crashOptions are the child's and the checker's: a small compaction bound,
// so kills land inside compactions too.
var crashOptions = Options{CompactBytes: minCompactBytes}

const crashWriters = 4

type crashItem struct {
	W, K int
	Pad  string
}

// crashChild opens the store, makes a conversation, and has four writers
// append to it until killed, each printing an item's id once its Append
// has returned.
func crashChild(dir string) {
	s, err := Open(dir, crashOptions)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c, _, err := s.Create(nil, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
		out.Unlock()
	}
	say("CONV %s", c.ID)
	for w := range crashWriters {
		go func() {
			for k := 0; ; k++ {
				d, _ := json.Marshal(crashItem{W: w, K: k, Pad: strings.Repeat("x", 200)})
				items, err := s.Append(c.ID, []Item{{Type: "message", Data: d}})
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(2)
				}
				say("ACK %d %d %s", w, k, items[0].ID)
			}
		}()
	}
	select {} // until the parent's SIGKILL
}

// crashRound is what one child acknowledged.
type crashRound struct {
	conv  string
	acked map[[2]int]string // (writer, k) → item id
}

// TestCrashDuringAppends kills a child store with SIGKILL at a random
// moment of a stream of appends, 100 times over one directory; after each
// kill the store opens, every acknowledged item of every round is there,
// each writer's items are a gapless prefix of what it sent (at most one
// more than it saw acknowledged: the record that was durable when the
// kill came), and a second open finds the log consistent.
func TestCrashDuringAppends(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(26, 1))
	var rounds []crashRound
	var torn int64
	acked := 0
	for round := range 100 {
		r := runCrashChild(t, dir, time.Duration(rng.IntN(12_000))*time.Microsecond)
		s, err := Open(dir, crashOptions)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		torn += s.Stats().TornTails
		if r.conv != "" {
			rounds = append(rounds, r)
			acked += len(r.acked)
		}
		for i, r := range rounds {
			checkCrashRound(t, s, r, fmt.Sprintf("round %d, child %d", round, i))
		}
		s.Close()
		s, err = Open(dir, crashOptions)
		if err != nil {
			t.Fatal(err)
		}
		if st := s.Stats(); st.TornTails != 0 {
			t.Fatalf("round %d: the recovered log is torn again: %+v", round, st)
		}
		gen := s.gen
		s.Close()
		if round == 99 {
			t.Logf("%d rounds with a conversation, %d items acknowledged, %d torn tails dropped, %d compactions", len(rounds), acked, torn, gen-1)
		}
	}
	if len(rounds) < 50 {
		t.Fatalf("only %d of 100 children got as far as a conversation", len(rounds))
	}
}

func runCrashChild(t *testing.T, dir string, delay time.Duration) crashRound {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashDuringAppends$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := crashRound{acked: map[[2]int]string{}}
	started := make(chan struct{})
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "CONV":
				r.conv = f[1]
				close(started)
			case len(f) == 4 && f[0] == "ACK":
				var w, k int
				fmt.Sscan(f[1], &w)
				fmt.Sscan(f[2], &k)
				r.acked[[2]int{w, k}] = f[3]
			}
		}
	}()
	select {
	case <-started:
		time.Sleep(delay) // where in the stream the kill lands: random, not asserted on
	case <-read:
	case <-time.After(time.Minute): // a child that never opens the store: fail, not hang
		cmd.Process.Kill()
		<-read
		cmd.Wait()
		t.Fatalf("the child never made its conversation: %s", stderr.String())
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-read
	cmd.Wait()
	if stderr.Len() > 0 && r.conv == "" {
		t.Fatalf("child failed: %s", stderr.String())
	}
	return r
}

func checkCrashRound(t *testing.T, s *Store, r crashRound, name string) {
	t.Helper()
	items, err := s.All(r.conv)
	if err != nil {
		t.Fatalf("%s: acknowledged conversation: %v", name, err)
	}
	next := make([]int, crashWriters) // each writer's next k
	byKey := map[[2]int]string{}
	for _, it := range items {
		var ci crashItem
		if err := json.Unmarshal(it.Data, &ci); err != nil || ci.W < 0 || ci.W >= crashWriters {
			t.Fatalf("%s: item %s is not whole: %q", name, it.ID, it.Data)
		}
		if ci.K != next[ci.W] {
			t.Fatalf("%s: writer %d's items skip from %d to %d", name, ci.W, next[ci.W]-1, ci.K)
		}
		next[ci.W]++
		byKey[[2]int{ci.W, ci.K}] = it.ID
	}
	ackedNext := make([]int, crashWriters)
	for key, id := range r.acked {
		if byKey[key] != id {
			t.Fatalf("%s: acknowledged item %v (%s) is missing", name, key, id)
		}
		ackedNext[key[0]] = max(ackedNext[key[0]], key[1]+1)
	}
	for w := range crashWriters {
		if next[w] > ackedNext[w]+1 {
			t.Fatalf("%s: writer %d has %d items, %d acknowledged: more than the one in flight", name, w, next[w], ackedNext[w])
		}
	}
}
