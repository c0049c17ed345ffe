package batches

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// CreateFile stores r's content as a new file. Uploads may have purpose
// "batch" (a batch's input), "user_data" or "vision" (an image);
// "batch_output" is the store's own.
func (s *Store) CreateFile(filename, purpose string, r io.Reader) (File, error) {
	switch purpose {
	case PurposeBatch, PurposeUserData, PurposeVision:
	case "":
		return File{}, invalid("purpose", "purpose is required")
	default:
		return File{}, invalid("purpose", "invalid purpose %q: this server accepts %q, %q and %q", purpose, PurposeBatch, PurposeUserData, PurposeVision)
	}
	filename = cleanFilename(filename)
	if filename == "" {
		return File{}, invalid("file", "the file has no name")
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return File{}, ErrClosed
	}
	q := &quotaReader{s: s, r: r}
	f, err := s.addFile(filename, purpose, q, "")
	s.unreserve(q.reserved) // indexed, the file's own size counts; failed, nothing does
	if qe := (*QuotaError)(nil); errors.As(err, &qe) {
		return File{}, qe
	}
	return f, err
}

// cleanFilename keeps a name's last element: it is shown, never used as a
// path, but a client should get back something sensible.
func cleanFilename(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "." || name == "/" || !utf8.ValidString(name) {
		return ""
	}
	if len(name) > 255 {
		name = name[:255]
	}
	return name
}

// addFile writes content then object, both atomically, so a listed file
// always has its content. It works on a closed store: the worker may be
// ending a batch while Close waits for it. id "" makes a new one; a given id is replaced
// (the output files of a batch whose end is run again).
func (s *Store) addFile(filename, purpose string, r io.Reader, id string) (File, error) {
	s.mu.Lock()
	if id == "" {
		id = s.newID("file-")
	}
	created := s.now()
	s.mu.Unlock()
	n, err := writeAtomic(s.filePath(id), r)
	if err != nil {
		return File{}, err
	}
	f := &File{ID: id, Object: "file", Bytes: n, CreatedAt: created, Filename: filename, Purpose: purpose, Status: "processed"}
	if err := writeJSON(s.filePath(id)+".json", f); err != nil {
		os.Remove(s.filePath(id))
		return File{}, err
	}
	s.mu.Lock()
	if old := s.files[id]; old != nil { // a batch's output written again
		s.filesBytes -= old.Bytes
	}
	s.files[id] = f
	s.filesBytes += f.Bytes
	s.mu.Unlock()
	return *f, nil
}

// File returns the file id.
func (s *Store) File(id string) (File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[id]
	if !ok {
		return File{}, notFound("No such File object: %s", id)
	}
	return *f, nil
}

// OpenFile opens the content of file id; the caller closes it.
func (s *Store) OpenFile(id string) (*os.File, File, error) {
	f, err := s.File(id)
	if err != nil {
		return nil, File{}, err
	}
	c, err := os.Open(s.filePath(id))
	if err != nil {
		if os.IsNotExist(err) { // deleted meanwhile
			return nil, File{}, notFound("No such File object: %s", id)
		}
		return nil, File{}, fmt.Errorf("batches: %w", err)
	}
	return c, f, nil
}

// DeleteFile removes file id: its object first, so that a crash between
// the two leaves content Open removes, never an object without content.
// The input of a batch still running cannot be deleted (a resumed run
// reads it again).
func (s *Store) DeleteFile(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if _, ok := s.files[id]; !ok {
		return notFound("No such File object: %s", id)
	}
	for _, b := range s.batches {
		if b.InputFileID == id && !b.Status.Finished() {
			return invalid("file_id", "file %s is the input of batch %s, which is %s; cancel it first", id, b.ID, b.Status)
		}
	}
	if err := os.Remove(s.filePath(id) + ".json"); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("batches: deleting %s: %w", id, err)
	}
	s.filesBytes -= s.files[id].Bytes
	delete(s.files, id)
	os.Remove(s.filePath(id))
	syncDir(filepath.Join(s.dir, "files"))
	return nil
}

// Files lists files, newest first unless p.Order is "asc". OpenAI's
// default page is 10000 files, its maximum too.
func (s *Store) Files(p ListParams) (Page[File], error) {
	if p.Purpose != "" && p.Purpose != PurposeBatch && p.Purpose != PurposeBatchOutput && p.Purpose != PurposeUserData && p.Purpose != PurposeVision {
		return Page[File]{}, invalid("purpose", "invalid purpose %q", p.Purpose)
	}
	s.mu.Lock()
	all := make([]File, 0, len(s.files))
	for _, f := range s.files {
		if p.Purpose == "" || f.Purpose == p.Purpose {
			all = append(all, *f)
		}
	}
	s.mu.Unlock()
	// Output files are named after their batch, so their ids do not sort
	// by creation: order by the creation time, then the id.
	slices.SortFunc(all, func(a, b File) int {
		if a.CreatedAt != b.CreatedAt {
			return cmp.Compare(a.CreatedAt, b.CreatedAt)
		}
		return strings.Compare(a.ID, b.ID)
	})
	switch p.Order {
	case "asc":
	case "", "desc":
		slices.Reverse(all)
	default:
		return Page[File]{}, invalid("order", "order must be \"asc\" or \"desc\", not %q", p.Order)
	}
	return page(all, p, 10000, 10000, func(f File) string { return f.ID })
}

// page cuts the page after p.After out of sorted items.
func page[T any](items []T, p ListParams, def, most int, id func(T) string) (Page[T], error) {
	limit := p.Limit
	if limit == 0 {
		limit = def
	}
	if limit < 1 || limit > most {
		return Page[T]{}, invalid("limit", "limit must be between 1 and %d, not %d", most, p.Limit)
	}
	if p.After != "" {
		i := slices.IndexFunc(items, func(v T) bool { return id(v) == p.After })
		if i < 0 {
			return Page[T]{}, invalid("after", "after: no object %q in the list", p.After)
		}
		items = items[i+1:]
	}
	out := Page[T]{Object: "list", Data: items[:min(limit, len(items))], HasMore: len(items) > limit}
	if len(out.Data) > 0 {
		out.FirstID, out.LastID = ptr(id(out.Data[0])), ptr(id(out.Data[len(out.Data)-1]))
	}
	return out, nil
}
