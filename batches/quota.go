package batches

import (
	"fmt"
	"io"
)

// DefaultMaxFilesBytes bounds what the files of the store hold together
// (uploads and batch outputs) when Config.MaxFilesBytes is 0. OpenAI's
// limit is per organization and far larger; on a workstation the data
// directory shares a disk with everything else, and 10 GiB is hundreds of
// batches of the size an upload may have (--max-body).
const DefaultMaxFilesBytes = 10 << 30

// QuotaError refuses an upload that would take the store's files past
// their bound. The HTTP layer answers it 413: a 4xx, so OpenAI's clients
// do not retry what cannot succeed until files are deleted.
type QuotaError struct {
	Limit int64 // the bound on the files' bytes together
	Used  int64 // what the store held when the upload was refused
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("the stored files would exceed this server's limit of %d bytes (%d bytes are stored); delete files (DELETE /v1/files/{id}) or raise --max-files-bytes", e.Limit, e.Used)
}

// quotaReader reserves, as an upload is read, the bytes it will take
// from the store's bound: concurrent uploads cannot both pass it. The
// caller gives the reservation back once the file is indexed (then the
// file's own size counts) or has failed.
type quotaReader struct {
	s        *Store
	r        io.Reader
	reserved int64
}

func (q *quotaReader) Read(p []byte) (int, error) {
	n, err := q.r.Read(p)
	if n > 0 {
		if qerr := q.s.reserve(int64(n)); qerr != nil {
			return 0, qerr
		}
		q.reserved += int64(n)
	}
	return n, err
}

// reserve takes n bytes of the bound, or refuses past it.
func (s *Store) reserve(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxFiles > 0 && s.filesBytes+n > s.maxFiles {
		return &QuotaError{Limit: s.maxFiles, Used: s.filesBytes}
	}
	s.filesBytes += n
	return nil
}

// unreserve gives n reserved bytes back.
func (s *Store) unreserve(n int64) {
	s.mu.Lock()
	s.filesBytes -= n
	s.mu.Unlock()
}

// FilesBytes is what the store's files hold together, with the uploads
// under way.
func (s *Store) FilesBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.filesBytes
}
