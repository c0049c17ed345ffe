package park

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const crashEnv = "SUPERFLUID_PARK_CRASH_DIR"

// crashBlob is the interrupted write's state: several chunks long.
func crashBlob() []byte { return stateBlob(3000, 2, 256, true, ggmlF16, 42) }

// TestCrashMidWriteLeavesNoPartialFile re-runs this test binary as a child
// that parks two conversations, then starts a third, larger write and
// stops mid-way through it (between two chunks of the temporary file); the
// parent kills it with SIGKILL there and indexes the directory: the two
// complete files load and verify, the half-written one exists under no
// final name, and its temporary file is removed.
func TestCrashMidWriteLeavesNoPartialFile(t *testing.T) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashChild(dir)
		return
	}
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashMidWriteLeavesNoPartialFile$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	defer func() {
		if t.Failed() {
			t.Logf("child's stderr:\n%s", stderr.String())
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	mid := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "MID-WRITE" {
				mid <- nil
				return
			}
		}
		mid <- fmt.Errorf("child ended before writing: %v", sc.Err())
	}()
	select {
	case err := <-mid:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("child never reached the middle of a write")
	}
	tmps, _ := filepath.Glob(filepath.Join(subdir(dir), "*.park.tmp*"))
	if len(tmps) != 1 {
		t.Fatalf("temporary files mid-write: %v", tmps)
	}
	if st, err := os.Stat(tmps[0]); err != nil || st.Size() < chunk {
		t.Fatalf("the temporary file is not part-written: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	s := open(t, testConfig(dir))
	if s.Stats().StaleTemps.Load() != 1 {
		t.Fatal("the interrupted write's temporary file was not removed")
	}
	if _, err := os.Stat(filepath.Join(subdir(dir), Name(toks(9, 3000)))); !os.IsNotExist(err) {
		t.Fatalf("the interrupted write exists under its final name: %v", err)
	}
	if n := len(s.List()); n != 2 {
		t.Fatalf("indexed %d files, want the 2 complete ones", n)
	}
	for i := range 2 {
		got, err := s.Load(toks(1000*(i+1), 100), nil)
		if err != nil || !bytes.Equal(got, stateBlob(100, 2, 64, true, ggmlF16, uint64(i))) {
			t.Fatalf("complete file %d: %v", i, err)
		}
	}
	ents, _ := os.ReadDir(subdir(dir))
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Fatalf("%s left", e.Name())
		}
	}
}

func crashChild(dir string) {
	s, err := Open(testConfig(dir))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for i := range 2 {
		s.Put(toks(1000*(i+1), 100), stateBlob(100, 2, 64, true, ggmlF16, uint64(i)), nil)
	}
	for s.Stats().Parks.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	calls := 0
	s.chunkHook = func() {
		if calls++; calls < 2 { // the header, then a chunk of payload
			return
		}
		fmt.Println("MID-WRITE")
		time.Sleep(time.Hour) // killed here
	}
	s.Put(toks(9, 3000), crashBlob(), nil)
	time.Sleep(time.Hour)
}
