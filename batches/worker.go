package batches

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"superfluid/batch"
	"superfluid/panics"
)

// Why a run stops before it is done (the cause of its context).
var (
	errCancelled = errors.New("batches: cancelled")
	errExpired   = errors.New("batches: expired")
)

// saveEvery bounds how often a running batch's counts are written: the
// results file is the record that matters, the counts are for polling.
const saveEvery = time.Second

// work runs batches, oldest first, until ctx ends.
func (s *Store) work(ctx context.Context) {
	defer close(s.done)
	for ctx.Err() == nil {
		id := s.next()
		if id == "" {
			select {
			case <-s.wake:
			case <-ctx.Done():
			}
			continue
		}
		pause := s.runSafely(ctx, id)
		s.mu.Lock()
		s.running, s.cancelRun = "", nil
		s.mu.Unlock()
		if pause > 0 {
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
	}
}

// beforeRun, when set (tests), runs on the worker as each batch starts.
var beforeRun func(id string)

// runSafely is run, a panic in it failing that batch alone (its results
// file kept, as for any failed batch) while the worker goes on with the
// next one.
func (s *Store) runSafely(ctx context.Context, id string) (pause time.Duration) {
	defer func() {
		if v := recover(); v != nil {
			err := panics.Recovered(panics.Batches, v, "batch", id)
			s.fail(id, BatchError{Code: "internal_error", Message: err.Error()})
			pause = 0
		}
	}()
	if beforeRun != nil {
		beforeRun(id)
	}
	return s.run(ctx, id)
}

// safeDoer answers a request whose handling panicked with a 500 in
// OpenAI's shape, as the server answers a handler's panic: that request
// fails, the batch's others run on.
type safeDoer struct{ batch.Doer }

func (d safeDoer) Do(ctx context.Context, method, url string, body []byte) (status int, resp []byte, err error) {
	defer func() {
		if v := recover(); v != nil {
			perr := panics.Recovered(panics.Batches, v, "url", url)
			msg, _ := json.Marshal(perr.Error())
			status, resp, err = 500, []byte(`{"error":{"message":`+string(msg)+`,"type":"server_error","param":null,"code":null}}`), nil
		}
	}()
	return d.Doer.Do(ctx, method, url, body)
}

// next picks the oldest batch waiting to run and marks it running.
func (s *Store) next() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range s.sortedBatchIDs() {
		if s.batches[id].Status == StatusInProgress {
			s.running = id
			return id
		}
	}
	return ""
}

// run runs one batch until it ends, is cancelled or expires, or the store
// closes (then it stays in_progress, to resume after a restart). Requests
// that got no answer or a server-side failure are sent again, after a
// growing pause, up to retryRounds times within the batch's window. It
// returns how long the worker should pause before the next batch: a
// failure of the server's own (its disk) leaves the batch in_progress with
// every answer kept, to try again after that pause.
func (s *Store) run(ctx context.Context, id string) time.Duration {
	s.mu.Lock()
	b := s.batches[id]
	expires, cancelling := *b.ExpiresAt, b.Status == StatusCancelling
	s.mu.Unlock()
	switch {
	case cancelling: // cancelled between next and here
		s.finish(id, StatusCancelled, nil)
		return 0
	case s.now() >= expires:
		if !s.finish(id, StatusExpired, nil) {
			return s.cfg.DiskPause
		}
		return 0
	}
	reqs, berr := s.requests(b)
	if berr != nil { // the input changed on disk since it was validated
		s.fail(id, *berr)
		return 0
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.mu.Lock()
	s.cancelRun = cancel
	if b.Status == StatusCancelling {
		cancel(errCancelled)
	}
	s.mu.Unlock()
	// A run past its window stops: at the deadline by the wall clock, or
	// at the next answer by the store's (tests move that one).
	timer := time.AfterFunc(time.Duration(expires-s.now())*time.Second, func() { cancel(errExpired) })
	defer timer.Stop()
	var err error
	for round := 0; ; round++ {
		var retryable int
		retryable, err = s.runOnce(runCtx, cancel, b, reqs, expires)
		if err != nil || retryable == 0 || round == retryRounds {
			break
		}
		slog.Info("batch: retrying requests that got no answer", "id", id, "requests", retryable, "round", round+1)
		select {
		case <-time.After(s.cfg.RetryPause << round):
		case <-runCtx.Done():
			err = runCtx.Err()
		}
		if err != nil {
			break
		}
	}
	ended := true
	switch cause := context.Cause(runCtx); {
	case err == nil:
		ended = s.finish(id, StatusCompleted, reqs)
	case ctx.Err() != nil: // the store is closing: resume after the restart
		s.mu.Lock()
		s.persistLocked(b)
		s.mu.Unlock()
	case errors.Is(cause, errCancelled):
		ended = s.finish(id, StatusCancelled, reqs)
	case errors.Is(cause, errExpired):
		ended = s.finish(id, StatusExpired, reqs)
	default: // the results file cannot be written (a full disk)
		slog.Error("batches: a batch paused: its results cannot be written", "id", id, "err", err, "retry_in", s.cfg.DiskPause)
		s.mu.Lock()
		s.persistLocked(b)
		s.mu.Unlock()
		return s.cfg.DiskPause
	}
	if !ended {
		return s.cfg.DiskPause
	}
	return 0
}

// retryRounds: how often a batch sends its requests that got no answer
// (or a 5xx, 429, 401/403) again before it completes with them failed.
const retryRounds = 3

// runOnce runs the requests b's results file does not answer yet and
// returns how many of them still want another try.
func (s *Store) runOnce(ctx context.Context, cancel context.CancelCauseFunc, b *Batch, reqs []batch.Request, expires int64) (int, error) {
	out, err := batch.OpenOwnOutput(s.resultPath(b.ID))
	if err != nil {
		return 0, err
	}
	// The counts are recomputed from what the results file holds: the
	// saved ones may be up to saveEvery stale, and OpenOutput dropped the
	// failures it will retry.
	base := RequestCounts{Total: len(reqs)}
	for _, q := range reqs {
		switch {
		case out.Succeeded(q.CustomID):
			base.Completed++
		case out.Done(q.CustomID):
			base.Failed++
		}
	}
	slog.Info("batch running", "id", b.ID, "requests", len(reqs), "answered", out.Len())
	s.mu.Lock()
	b.RequestCounts = base
	s.persistLocked(b)
	s.mu.Unlock()
	saved := time.Now()
	r := batch.Runner{Doer: safeDoer{s.doer}, Parallel: s.cfg.Parallel, Retries: s.cfg.Retries, Backoff: s.cfg.Backoff,
		OnProgress: func(p batch.Progress) {
			s.mu.Lock()
			b.RequestCounts.Completed = base.Completed + p.Done - p.Resumed - p.Failed
			b.RequestCounts.Failed = base.Failed + p.Failed
			if time.Since(saved) >= saveEvery {
				s.persistLocked(b)
				saved = time.Now()
			}
			s.mu.Unlock()
			if s.now() >= expires {
				cancel(errExpired)
			}
		}}
	p, err := r.Run(ctx, reqs, out)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	return p.Retry, nil
}

// fail ends a batch failed: its input cannot run. What its results file
// holds stays on disk.
func (s *Store) fail(id string, e BatchError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batches[id]
	b.Status, b.FailedAt, b.Errors = StatusFailed, ptr(s.now()), &Errors{Object: "list", Data: []BatchError{e}}
	s.persistLocked(b)
}

// finish ends a batch as status (completed, cancelled or expired): its
// results are split into an output file and an error file, ordered as
// the input (reqs; nil reads it again), and the results file is removed.
// A completed batch passes through finalizing meanwhile; one cancelled
// since its run ended ends cancelled.
func (s *Store) finish(id string, status Status, reqs []batch.Request) bool {
	s.mu.Lock()
	b := s.batches[id]
	if status == StatusCompleted && b.Status == StatusCancelling {
		status = StatusCancelled
	}
	if status == StatusCompleted {
		b.Status, b.FinalizingAt = StatusFinalizing, ptr(s.now())
		s.persistLocked(b)
	}
	s.mu.Unlock()
	if reqs == nil {
		reqs, _ = s.requests(b) // nil for an input that cannot be read: results order
	}
	outID, errID, counts, err := s.split(b.ID, reqs, status)
	if err != nil {
		// Its answers are all in the results file: the batch goes back to
		// in_progress, and its next run (after a restart at the latest)
		// finds everything answered and finishes again.
		slog.Error("batches: writing a batch's output failed; it will finish again", "id", id, "err", err)
		s.mu.Lock()
		defer s.mu.Unlock()
		if status == StatusCompleted {
			b.Status = StatusInProgress
			s.persistLocked(b)
		}
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := ptr(s.now())
	b.Status, b.OutputFileID, b.ErrorFileID = status, outID, errID
	if reqs != nil {
		counts.Total = len(reqs)
	} else {
		counts.Total = b.RequestCounts.Total
	}
	b.RequestCounts = counts
	switch status {
	case StatusCompleted:
		b.CompletedAt = now
	case StatusCancelled:
		b.CancelledAt = now
	case StatusExpired:
		b.ExpiredAt = now
	}
	s.persistLocked(b)
	os.Remove(s.resultPath(id))
	slog.Info("batch ended", "id", id, "status", status, "completed", counts.Completed, "failed", counts.Failed, "total", counts.Total)
	return true
}

// split writes the output file (records with a 2xx answer) and the error
// file (the rest) of a batch's results and returns their ids: nil for none
// (the output file is made for a completed batch even when empty, so that
// a client that reads it finds it; the error file only when there were
// failures). An expired batch's unanswered requests get a batch_expired
// record in the error file, as OpenAI's do. The files' ids derive from the
// batch's, so that an end run again after a crash replaces them rather
// than leaving strays.
func (s *Store) split(id string, reqs []batch.Request, status Status) (outID, errID *string, counts RequestCounts, err error) {
	recs := readResults(s.resultPath(id))
	var ok, failed bytes.Buffer
	add := func(line []byte, succeeded bool) {
		if succeeded {
			ok.Write(line)
			counts.Completed++
		} else {
			failed.Write(line)
			counts.Failed++
		}
	}
	if reqs != nil {
		for _, q := range reqs {
			if r, found := recs[q.CustomID]; found {
				add(r.line, r.rec.Succeeded())
			} else if status == StatusExpired {
				add(expiredRecord(q.CustomID), false)
			}
		}
	} else { // the input cannot be read: the results file's order
		order := make([]string, 0, len(recs))
		for cid := range recs {
			order = append(order, cid)
		}
		slices.SortFunc(order, func(a, b string) int { return recs[a].n - recs[b].n })
		for _, cid := range order {
			add(recs[cid].line, recs[cid].rec.Succeeded())
		}
	}
	suffix := strings.TrimPrefix(id, "batch_")
	if counts.Completed > 0 || status == StatusCompleted {
		f, err := s.addFile(id+"_output.jsonl", PurposeBatchOutput, &ok, "file-"+suffix+"-output")
		if err != nil {
			return nil, nil, counts, err
		}
		outID = &f.ID
	}
	if counts.Failed > 0 {
		f, err := s.addFile(id+"_error.jsonl", PurposeBatchOutput, &failed, "file-"+suffix+"-error")
		if err != nil {
			return nil, nil, counts, err
		}
		errID = &f.ID
	}
	return outID, errID, counts, nil
}

// expiredRecord is the error line of a request its batch's window ended
// before.
func expiredRecord(customID string) []byte {
	var r [12]byte
	rand.Read(r[:])
	b, _ := json.Marshal(batch.Record{ID: "batch_req_" + hex.EncodeToString(r[:]), CustomID: customID,
		Error: &batch.RecordError{Code: "batch_expired", Message: "This request could not be executed before the completion window expired."}})
	return append(b, '\n')
}

type result struct {
	rec  batch.Record
	line []byte // with its newline
	n    int    // its place in the file
}

// readResults reads a results file: each custom_id's final record (else
// its first), skipping what does not parse. A missing file holds nothing.
func readResults(path string) map[string]result {
	out := map[string]result{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for n := 0; ; n++ {
		line, err := br.ReadBytes('\n')
		var r batch.Record
		if len(line) > 0 && line[len(line)-1] == '\n' && json.Unmarshal(line, &r) == nil && r.CustomID != "" {
			if old, seen := out[r.CustomID]; !seen || !old.rec.Final() && r.Final() {
				out[r.CustomID] = result{r, line, n}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				slog.Warn("batches: reading results", "path", path, "err", err)
			}
			return out
		}
	}
}
