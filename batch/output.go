package batch

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"superfluid/flock"
)

// Output is a JSONL file of records open for appending. It is the batch's
// only progress record: a line is written whole with one write, and
// opening it again keeps only what a rerun can trust.
type Output struct {
	f    *os.File
	path string
	done map[string]bool // custom_id → its record is a 2xx answer
	lock *os.File        // path.lock, held while open; nil for own files
}

// ErrNotResults is wrapped by OpenOutput when the file has a line that is
// not a batch result: the file is somebody else's (the input named as the
// output, say), and rewriting it would lose that line.
var ErrNotResults = errors.New("not a batch results file")

// OpenOutput opens (or creates) a results file a user named. Of an
// existing file it keeps each final record once and drops what a rerun
// redoes: failures worth retrying, repeats, and a last line cut short by a
// kill. A complete line that is not a record makes it refuse the file
// (ErrNotResults). When anything was dropped the file is rewritten (temp
// file, fsync, rename) before new lines are appended. path.lock is held
// until Close, so two runs never write one file.
func OpenOutput(path string) (*Output, error) {
	lock, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("batch: output: %w", err)
	}
	if err := flock.Try(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("batch: output %s: another run is writing it (%w)", path, err)
	}
	o, err := openOutput(path, true)
	if err != nil {
		os.Remove(lock.Name())
		lock.Close()
		return nil, err
	}
	o.lock = lock
	return o, nil
}

// OpenOwnOutput is OpenOutput for a file only superfluid writes (the
// server's per-batch results): a line that is not a record is damage, and
// is dropped like a line cut short. It takes no lock: its owner
// serializes access.
func OpenOwnOutput(path string) (*Output, error) { return openOutput(path, false) }

func openOutput(path string, strict bool) (*Output, error) {
	kept, dropped, err := readOutput(path, strict)
	if err != nil {
		return nil, err
	}
	o := &Output{path: path, done: map[string]bool{}}
	for _, r := range kept {
		o.done[r.customID] = r.succeeded
	}
	if dropped {
		if err := rewrite(path, kept); err != nil {
			return nil, err
		}
	}
	o.f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("batch: output: %w", err)
	}
	return o, nil
}

type keptLine struct {
	customID  string
	succeeded bool
	line      []byte // with its newline
}

func readOutput(path string, strict bool) (kept []keptLine, dropped bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("batch: output: %w", err)
	}
	defer f.Close()
	seen := map[string]bool{}
	br := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var r Record
			whole := line[len(line)-1] == '\n'
			record := json.Unmarshal(line, &r) == nil && r.CustomID != "" && (r.Response != nil || r.Error != nil)
			switch {
			case whole && !record && strict && len(bytes.TrimSpace(line)) > 0:
				return nil, false, fmt.Errorf("batch: line %d of %s is not a batch result; refusing to overwrite the file (name another output): %w", n, path, ErrNotResults)
			case !whole, !record, !r.Final(), seen[r.CustomID]:
				dropped = true
			default:
				seen[r.CustomID] = true
				kept = append(kept, keptLine{r.CustomID, r.Succeeded(), line})
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return kept, dropped, nil
			}
			return nil, false, fmt.Errorf("batch: reading %s: %w", path, err)
		}
	}
}

func rewrite(path string, kept []keptLine) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("batch: rewriting the output: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename: a no-op
	w := bufio.NewWriter(tmp)
	for _, k := range kept {
		w.Write(k.line)
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("batch: rewriting the output: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("batch: rewriting the output: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("batch: rewriting the output: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("batch: rewriting the output: %w", err)
	}
	return syncDir(filepath.Dir(path))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil // nothing to sync on systems that cannot open a directory
	}
	defer d.Close()
	d.Sync()
	return nil
}

// Done reports whether the file already answers customID.
func (o *Output) Done(customID string) bool {
	_, ok := o.done[customID]
	return ok
}

// Succeeded reports whether the file answers customID with a 2xx answer.
func (o *Output) Succeeded(customID string) bool { return o.done[customID] }

// Len is how many custom_ids the file answers.
func (o *Output) Len() int { return len(o.done) }

// Path is the file's path.
func (o *Output) Path() string { return o.path }

// Append writes r as one line. A failed write (a full disk) may leave a
// partial last line; the next OpenOutput drops it.
func (o *Output) Append(r *Record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("batch: encoding the record of %q: %w", r.CustomID, err)
	}
	b = append(b, '\n')
	if _, err := o.f.Write(b); err != nil {
		return fmt.Errorf("batch: writing %s: %w", o.path, err)
	}
	o.done[r.CustomID] = r.Succeeded()
	return nil
}

// Close flushes the file to disk and closes it.
func (o *Output) Close() error {
	err := o.f.Sync()
	if e := o.f.Close(); err == nil {
		err = e
	}
	if o.lock != nil {
		os.Remove(o.lock.Name()) // still held: no other run has it open
		o.lock.Close()
	}
	if err != nil {
		return fmt.Errorf("batch: closing %s: %w", o.path, err)
	}
	return nil
}
