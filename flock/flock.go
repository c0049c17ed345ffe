// Package flock takes the advisory locks that keep two superfluid processes
// off one directory (a park directory, a data directory) or one file (a
// partial download). The kernel drops a lock when its descriptor closes or
// the process dies, however it dies, so nothing is left to clean up.
package flock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrHeld is wrapped by a failed lock: another process holds it.
var ErrHeld = errors.New("in use by another process")

// Try locks f exclusively, without waiting. Where the system has no
// flock(2) it does nothing: one process per path is then the user's to
// ensure.
func Try(f *os.File) error {
	if err := tryLock(f); err != nil {
		return fmt.Errorf("%s is %w (%v)", f.Name(), ErrHeld, err)
	}
	return nil
}

// Dir locks dir/LOCK and returns it open; closing it releases the lock.
func Dir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := tryLock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is %w (%v)", dir, ErrHeld, err)
	}
	return f, nil
}
