package respstore

import (
	"fmt"
	"os"
	"path/filepath"
)

// tmpSuffix marks files being written; the sweep removes those a crash
// left behind.
const tmpSuffix = ".tmp"

// writeAtomic writes b to path: a temporary file in the same directory,
// synced, renamed over path, the directory synced.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*"+tmpSuffix)
	if err != nil {
		return fmt.Errorf("respstore: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename: a no-op
	_, err = tmp.Write(b)
	if err == nil {
		err = tmp.Sync()
	}
	if e := tmp.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("respstore: writing %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
