//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package park

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockDir takes an exclusive lock on dir/LOCK, so that two servers never
// share a park directory: each would remove the other's in-flight temporary
// files at start-up and sweep the other's files to its own budget. The
// kernel drops the lock when the process dies, however it dies.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("park: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("park: %s is in use by another process (%v)", dir, err)
	}
	return f, nil
}

func unlockDir(f *os.File) error {
	if f == nil {
		return nil
	}
	return f.Close() // closing the descriptor releases the lock
}
