package batches

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// tmpSuffix marks files being written; Open removes those a crash left.
const tmpSuffix = ".tmp"

// writeAtomic writes path from r: a temporary file in the same directory,
// synced, renamed over path, the directory synced. A crash leaves either
// the old file or the new one, never a part. It returns the bytes written.
func writeAtomic(path string, r io.Reader) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*"+tmpSuffix)
	if err != nil {
		return 0, fmt.Errorf("batches: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename: a no-op
	n, err := io.Copy(tmp, r)
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
		return 0, fmt.Errorf("batches: writing %s: %w", path, err)
	}
	syncDir(filepath.Dir(path))
	return n, nil
}

// writeJSON writes v to path atomically.
func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("batches: encoding %s: %w", path, err)
	}
	_, err = writeAtomic(path, bytes.NewReader(b))
	return err
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
