package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"superfluid/flock"
	"superfluid/gguf"
)

// download is one file's transfer into NAME.gguf.partial.
type download struct {
	p                       *puller
	ref, source, url, name  string
	final, partial, sidecar string
	want                    string // expected sha256, "" unknown
	meta                    remoteMeta

	f       *os.File
	st      partialState
	have    int64 // bytes on disk
	resumed int64 // bytes kept from an earlier pull
	h       hash.Hash
	hashed  int64  // bytes of the partial file in h; -1: must rehash
	head    []byte // the file's first bytes, for the magic check
	sum     string // the final digest
}

const headLen = 16

func (d *download) run(ctx context.Context) (err error) {
	d.partial = d.final + ".partial"
	d.sidecar = d.partial + ".json"
	d.f, err = os.OpenFile(d.partial, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	defer func() {
		if d.f != nil {
			d.f.Close()
		}
	}()
	if err := flock.Try(d.f); err != nil { // two pulls of one name must not append to one file
		return fmt.Errorf("pull: another pull of %s is running (%v)", d.name, err)
	}
	fi, err := d.f.Stat()
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	d.have = fi.Size()
	d.h = sha256.New()
	d.st = partialState{Source: d.source, URL: d.url, Size: d.meta.size, SHA256: d.meta.sha256, ETag: d.meta.etag}
	if d.have > 0 {
		var old partialState
		b, rerr := os.ReadFile(d.sidecar)
		if rerr == nil {
			rerr = json.Unmarshal(b, &old)
		}
		switch {
		case rerr == nil && old.Source != d.source:
			return fmt.Errorf("pull: %s is a partial download of %s; rerun that pull to finish it, or pass --name", d.partial, old.Source)
		case rerr != nil || old.URL != d.url ||
			(d.st.Size >= 0 && old.Size >= 0 && d.st.Size != old.Size) ||
			(d.st.SHA256 != "" && old.SHA256 != "" && d.st.SHA256 != old.SHA256):
			// Unknown provenance or a different version: start over.
			if err := d.restart(); err != nil {
				return err
			}
		default:
			d.st.Validator = old.Validator
			if d.st.Size < 0 {
				d.st.Size = old.Size
			}
			if d.st.ETag == "" {
				d.st.ETag = old.ETag
			}
		}
	}
	d.hashed = -1
	d.resumed = d.have
	if err := d.checkCap(d.st.Size); err != nil {
		return err
	}
	if err := d.saveState(); err != nil {
		return err
	}
	d.report()
	for tries := 0; ; {
		progressed, err := d.attempt(ctx)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return d.interrupted(ctx.Err())
		}
		if !isTransient(err) {
			return err
		}
		if progressed {
			tries = 0
		}
		if tries++; tries > d.p.opts.Retries {
			return fmt.Errorf("%w (gave up after %d attempts; rerun to resume from %s)", err, tries, FormatSize(d.have))
		}
		if err := d.p.wait(ctx, tries); err != nil {
			return d.interrupted(err)
		}
	}
	return d.finish()
}

func (d *download) interrupted(cause error) error {
	total := "an unknown size"
	if d.st.Size >= 0 {
		total = FormatSize(d.st.Size)
	}
	return &interruptedError{fmt.Sprintf("pull: %s interrupted with %s of %s on disk; run the same pull again to resume", d.name, FormatSize(d.have), total), cause}
}

// interruptedError says what was kept; it wraps the context's error.
type interruptedError struct {
	msg   string
	cause error
}

func (e *interruptedError) Error() string { return e.msg }
func (e *interruptedError) Unwrap() error { return e.cause }

func (d *download) report() { d.reportStage(Downloading) }

func (d *download) reportStage(stage Stage) {
	if d.p.opts.OnProgress != nil {
		d.p.opts.OnProgress(Progress{Name: d.name, Stage: stage, Done: d.have, Total: d.st.Size, Start: d.resumed, SHA256: d.want})
	}
}

// restart empties the partial file.
func (d *download) restart() error {
	if err := d.f.Truncate(0); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	d.have, d.resumed, d.hashed, d.head = 0, 0, 0, nil
	d.h.Reset()
	d.st.Validator = ""
	return nil
}

// discard removes the partial file and its sidecar, for bytes that must
// never be resumed from.
func (d *download) discard() {
	d.f.Close()
	d.f = nil
	os.Remove(d.partial)
	os.Remove(d.sidecar)
}

func (d *download) fail(format string, args ...any) error {
	d.discard()
	return fmt.Errorf(format, args...)
}

func (d *download) saveState() error {
	b, _ := json.MarshalIndent(d.st, "", "  ")
	return writeFileAtomic(d.sidecar, b, false)
}

// attempt makes one GET for the bytes not yet on disk and appends them.
// progressed reports whether any arrived.
func (d *download) attempt(ctx context.Context) (progressed bool, err error) {
	// Hash what is on disk before the request, outside the stall timer:
	// after resuming a large partial file this takes a while.
	if err := d.catchUpHash(); err != nil {
		return false, err
	}
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Bool
	stall := time.AfterFunc(d.p.stall, func() { stalled.Store(true); cancel() })
	defer stall.Stop()
	defer func() {
		if err != nil && stalled.Load() && ctx.Err() == nil {
			err = transient(fmt.Errorf("pull: %s: no data for %s", d.url, d.p.stall))
		}
	}()

	req, err := d.p.request(actx, http.MethodGet, d.url)
	if err != nil {
		return false, fmt.Errorf("pull: %w", err)
	}
	// The file's own bytes, never a compressed rendition: offsets and
	// digests refer to them.
	req.Header.Set("Accept-Encoding", "identity")
	if d.have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", d.have))
		if d.st.Validator != "" {
			req.Header.Set("If-Range", d.st.Validator)
		}
	}
	resp, err := d.p.client.Do(req)
	if err != nil {
		return false, transportError(err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
		first, total, ok := parseContentRange(resp.Header.Get("Content-Range"))
		if !ok || first != d.have || (total >= 0 && d.st.Size >= 0 && total != d.st.Size) {
			// Not the continuation asked for: start over.
			if err := d.restart(); err != nil {
				return false, err
			}
			return false, transient(fmt.Errorf("pull: %s: answered %q to a request from byte %d", d.url, resp.Header.Get("Content-Range"), d.have))
		}
		if d.st.Size < 0 {
			d.st.Size = total
		}
		if err := d.checkCap(d.st.Size); err != nil {
			return false, err
		}
		if d.st.Validator == "" {
			d.st.Validator = validatorOf(resp)
		}
	case http.StatusOK:
		if d.have > 0 { // changed on the server, or no Range support
			if err := d.restart(); err != nil {
				return false, err
			}
		}
		d.st.Size = d.meta.size // what an earlier response said no longer holds
		if n := resp.ContentLength; n >= 0 {
			if d.st.Size >= 0 && n != d.st.Size {
				return false, d.fail("pull: %s: the server sends %d bytes, %d were announced", d.name, n, d.st.Size)
			}
			d.st.Size = n
		}
		if err := d.checkCap(d.st.Size); err != nil {
			return false, err
		}
		d.st.Validator = validatorOf(resp)
		if e := unquoteETag(resp.Header.Get("ETag")); e != "" && d.meta.etag == "" {
			d.st.ETag = e
		}
	case http.StatusRequestedRangeNotSatisfiable:
		total := d.st.Size
		if _, t, ok := parseContentRange(resp.Header.Get("Content-Range")); ok && t >= 0 {
			total = t
		}
		if d.have > 0 && total == d.have {
			return false, nil // the partial file is complete
		}
		if err := d.restart(); err != nil {
			return false, err
		}
		return false, transient(fmt.Errorf("pull: %s: range from byte %d refused", d.url, d.have))
	default:
		return false, statusError(resp, d.url, d.p.isEndpoint(req.URL))
	}
	if err := d.saveState(); err != nil {
		return false, err
	}
	if _, err := d.f.Seek(d.have, io.SeekStart); err != nil {
		return false, fmt.Errorf("pull: %w", err)
	}
	d.report()
	buf := make([]byte, 256<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			stall.Reset(d.p.stall)
			if err := d.write(buf[:n]); err != nil {
				return progressed, err
			}
			progressed = true
			d.report()
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return progressed, transient(fmt.Errorf("pull: %s: %w", d.url, rerr))
		}
	}
	if d.st.Size >= 0 && d.have < d.st.Size {
		return progressed, transient(fmt.Errorf("pull: %s: the connection ended at byte %d of %d", d.url, d.have, d.st.Size))
	}
	return progressed, nil
}

// write appends a chunk, refusing a file that does not start with the
// GGUF magic or grows past its announced size.
func (d *download) write(b []byte) error {
	if d.st.Size >= 0 && d.have+int64(len(b)) > d.st.Size {
		return d.fail("pull: %s: the server sends more than the %d bytes announced", d.name, d.st.Size)
	}
	if err := d.checkCap(d.have + int64(len(b))); err != nil {
		return err
	}
	if err := d.checkHead(b); err != nil {
		return err
	}
	if _, err := d.f.Write(b); err != nil {
		d.hashed = -1
		return fmt.Errorf("pull: %w", err)
	}
	d.h.Write(b)
	d.have += int64(len(b))
	d.hashed = d.have
	return nil
}

// checkCap fails the pull, its partial file removed, when size (the
// file's, or what it has grown to; < 0 unknown) is past Options.MaxBytes.
func (d *download) checkCap(size int64) error {
	if limit := d.p.opts.MaxBytes; limit > 0 && size > limit {
		return d.fail("pull: %s is larger than this server's limit of %s on a pull (--max-pull-bytes); the partial download was removed", d.name, FormatSize(limit))
	}
	return nil
}

// checkHead keeps the file's first bytes and checks the magic as soon as
// four have arrived.
func (d *download) checkHead(b []byte) error {
	if len(d.head) >= headLen {
		return nil
	}
	had := len(d.head)
	d.head = append(d.head, b[:min(len(b), headLen-had)]...)
	if had < len(gguf.Magic) && len(d.head) >= len(gguf.Magic) && string(d.head[:len(gguf.Magic)]) != gguf.Magic {
		return d.fail("pull: %s is not a GGUF file (starts with %q)", d.source, d.head)
	}
	return nil
}

// catchUpHash brings the digest up to the bytes on disk: after resuming
// from an earlier pull it hashes the partial file's prefix.
func (d *download) catchUpHash() error {
	if d.hashed == d.have {
		return nil
	}
	d.h.Reset()
	d.head = nil
	d.hashed = 0
	if _, err := d.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	buf := make([]byte, 256<<10)
	r := io.LimitReader(d.f, d.have)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if err := d.checkHead(buf[:n]); err != nil {
				return err
			}
			d.h.Write(buf[:n])
			d.hashed += int64(n)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("pull: %w", err)
		}
	}
	if d.hashed != d.have {
		return fmt.Errorf("pull: %s: read %d of %d bytes", d.partial, d.hashed, d.have)
	}
	return nil
}

// finish verifies the complete partial file and gives it its name.
func (d *download) finish() error {
	d.reportStage(Verifying)
	if err := d.catchUpHash(); err != nil { // a 416 on resume: nothing was hashed yet
		return err
	}
	if d.st.Size >= 0 && d.have != d.st.Size {
		return d.fail("pull: %s: %d bytes, expected %d; the download was removed", d.name, d.have, d.st.Size)
	}
	d.sum = hex.EncodeToString(d.h.Sum(nil))
	if d.want != "" && d.sum != d.want {
		return d.fail("pull: %s: sha256 mismatch: expected %s, got %s; the download was removed", d.name, d.want, d.sum)
	}
	if err := d.f.Sync(); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	if _, err := gguf.Open(d.partial); err != nil {
		return d.fail("pull: %s is not a valid GGUF file (%v); the download was removed", d.source, err)
	}
	d.reportStage(Saving)
	m := manifest{Ref: d.ref, Source: d.source, URL: d.url, Size: d.have, SHA256: d.sum, ETag: d.st.ETag, PulledAt: time.Now().UTC()}
	b, _ := json.MarshalIndent(m, "", "  ")
	// The manifest first: a crash before the rename leaves a complete
	// partial file that the next pull verifies and renames.
	if err := writeFileAtomic(manifestPath(d.final), b, true); err != nil {
		return err
	}
	if err := d.f.Close(); err != nil {
		d.f = nil
		return fmt.Errorf("pull: %w", err)
	}
	d.f = nil
	if err := os.Rename(d.partial, d.final); err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	os.Remove(d.sidecar)
	syncDir(filepath.Dir(d.final))
	return nil
}

// validatorOf is what If-Range may carry: a strong ETag, else
// Last-Modified.
func validatorOf(resp *http.Response) string {
	if e := resp.Header.Get("ETag"); e != "" && !strings.HasPrefix(e, "W/") {
		return e
	}
	return resp.Header.Get("Last-Modified")
}

// parseContentRange reads "bytes FIRST-LAST/TOTAL" or "bytes */TOTAL";
// first and total are -1 where absent or "*".
func parseContentRange(s string) (first, total int64, ok bool) {
	rest, found := strings.CutPrefix(strings.TrimSpace(s), "bytes ")
	if !found {
		return -1, -1, false
	}
	span, size, found := strings.Cut(rest, "/")
	if !found {
		return -1, -1, false
	}
	first, total = -1, -1
	if span != "*" {
		a, _, found := strings.Cut(span, "-")
		n, err := strconv.ParseInt(a, 10, 64)
		if !found || err != nil || n < 0 {
			return -1, -1, false
		}
		first = n
	}
	if size != "*" {
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil || n < 0 {
			return -1, -1, false
		}
		total = n
	}
	return first, total, true
}

// writeFileAtomic writes path through a temporary file in its directory.
func writeFileAtomic(path string, b []byte, sync bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("pull: %w", err)
	}
	_, err = tmp.Write(b)
	if err == nil && sync {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("pull: %w", err)
	}
	return nil
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}
