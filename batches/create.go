package batches

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"superfluid/batch"
)

// The completion window OpenAI offers, and how long a batch has.
const (
	completionWindow = "24h"
	windowSeconds    = 24 * 60 * 60
)

// CreateBatch checks p, records the batch and validates its input at once,
// so that a malformed file is reported by the first poll rather than when
// the worker gets to it. A valid batch is in_progress and waits its turn;
// one whose input cannot run (a duplicate custom_id, no request) is
// created failed, as OpenAI's are.
func (s *Store) CreateBatch(p BatchParams) (Batch, error) {
	if p.InputFileID == "" {
		return Batch{}, invalid("input_file_id", "input_file_id is required")
	}
	switch p.Endpoint {
	case batch.ChatCompletions, batch.Completions, batch.Embeddings:
	case "":
		return Batch{}, invalid("endpoint", "endpoint is required")
	default:
		return Batch{}, invalid("endpoint", "endpoint %q is not supported; this server runs batches of %s, %s and %s", p.Endpoint, batch.ChatCompletions, batch.Completions, batch.Embeddings)
	}
	if p.CompletionWindow != completionWindow {
		return Batch{}, invalid("completion_window", "completion_window must be %q, not %q", completionWindow, p.CompletionWindow)
	}
	if err := checkMetadata(p.Metadata); err != nil {
		return Batch{}, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return Batch{}, ErrClosed
	}
	in, ok := s.files[p.InputFileID]
	if !ok {
		s.mu.Unlock()
		return Batch{}, notFound("No such File object: %s", p.InputFileID)
	}
	if in.Purpose != PurposeBatch {
		s.mu.Unlock()
		return Batch{}, invalid("input_file_id", "file %s has purpose %q; a batch's input must have purpose %q", in.ID, in.Purpose, PurposeBatch)
	}
	now := s.now()
	b := &Batch{
		ID: s.newID("batch_"), Object: "batch", Endpoint: p.Endpoint, InputFileID: p.InputFileID,
		CompletionWindow: p.CompletionWindow, Status: StatusValidating, CreatedAt: now,
		ExpiresAt: ptr(now + windowSeconds), Metadata: p.Metadata,
	}
	s.batches[b.ID] = b
	s.persistLocked(b)
	s.mu.Unlock()
	s.validate(b.ID)
	s.poke()
	return s.Batch(b.ID)
}

func checkMetadata(m map[string]string) error {
	if len(m) > 16 {
		return invalid("metadata", "metadata has %d pairs; at most 16 are allowed", len(m))
	}
	for k, v := range m {
		if utf8.RuneCountInString(k) > 64 {
			return invalid("metadata", "metadata key %q is longer than 64 characters", k)
		}
		if utf8.RuneCountInString(v) > 512 {
			return invalid("metadata", "the value of metadata key %q is longer than 512 characters", k)
		}
	}
	return nil
}

// validate reads a validating batch's input: it goes in_progress with its
// total, or failed with the reason. A batch that left validating meanwhile
// (cancelled) is left alone.
func (s *Store) validate(id string) {
	s.mu.Lock()
	b := s.batches[id]
	s.mu.Unlock()
	reqs, berr := s.requests(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.Status != StatusValidating {
		return
	}
	now := s.now()
	if berr != nil {
		b.Status, b.FailedAt, b.Errors = StatusFailed, ptr(now), &Errors{Object: "list", Data: []BatchError{*berr}}
	} else {
		b.Status, b.InProgressAt = StatusInProgress, ptr(now)
		b.RequestCounts = RequestCounts{Total: len(reqs)}
	}
	s.persistLocked(b)
}

// requests reads b's input. Lines that cannot run become error records
// (their Invalid set): a malformed line, and one for another endpoint than
// the batch's. A file that cannot run at all is a BatchError.
func (s *Store) requests(b *Batch) ([]batch.Request, *BatchError) {
	f, _, err := s.OpenFile(b.InputFileID)
	if err != nil {
		return nil, &BatchError{Code: "invalid_file", Message: fmt.Sprintf("the input file %s cannot be read: %v", b.InputFileID, err), Param: ptr("input_file_id")}
	}
	defer f.Close()
	reqs, err := batch.ReadInput(f)
	if dup := (*batch.DuplicateIDError)(nil); errors.As(err, &dup) {
		return nil, &BatchError{Code: "duplicate_custom_id", Message: strings.TrimPrefix(err.Error(), "batch: "), Line: ptr(dup.Line)}
	}
	if err != nil {
		return nil, &BatchError{Code: "invalid_file", Message: err.Error(), Param: ptr("input_file_id")}
	}
	if len(reqs) == 0 {
		return nil, &BatchError{Code: "empty_file", Message: fmt.Sprintf("the input file %s has no requests", b.InputFileID), Param: ptr("input_file_id")}
	}
	for i := range reqs {
		if q := &reqs[i]; q.Invalid == "" && q.URL != b.Endpoint {
			q.Invalid = fmt.Sprintf("line %d: url %s does not match the batch's endpoint %s", q.Line, q.URL, b.Endpoint)
		}
	}
	return reqs, nil
}

// Batch returns the batch id.
func (s *Store) Batch(id string) (Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.batches[id]
	if !ok {
		return Batch{}, notFound("No batch found with id '%s'.", id)
	}
	return *b, nil
}

// Batches lists batches newest first, 20 a page by default, 100 at most.
func (s *Store) Batches(p ListParams) (Page[Batch], error) {
	if p.Order != "" || p.Purpose != "" {
		return Page[Batch]{}, invalid("", "batches are listed newest first, with no filter")
	}
	s.mu.Lock()
	ids := s.sortedBatchIDs()
	all := make([]Batch, len(ids))
	for i, id := range ids {
		all[i] = *s.batches[id]
	}
	s.mu.Unlock()
	slices.Reverse(all)
	return page(all, p, 20, 100, func(b Batch) string { return b.ID })
}

// sortedBatchIDs are the batches' ids, oldest first (ids sort by creation).
func (s *Store) sortedBatchIDs() []string {
	ids := make([]string, 0, len(s.batches))
	for id := range s.batches {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Cancel cancels a batch that has not finished. The running one stops
// (its requests in flight are abandoned) and the worker ends it; one that
// waits its turn ends here. Either way it ends cancelled, with output and
// error files of what was answered.
func (s *Store) Cancel(id string) (Batch, error) {
	s.mu.Lock()
	b, ok := s.batches[id]
	if !ok {
		s.mu.Unlock()
		return Batch{}, notFound("No batch found with id '%s'.", id)
	}
	switch b.Status {
	case StatusValidating, StatusInProgress:
	case StatusCancelling:
		defer s.mu.Unlock()
		return *b, nil
	default:
		s.mu.Unlock()
		return Batch{}, invalid("", "Cannot cancel a batch with status '%s'.", b.Status)
	}
	if s.closed {
		s.mu.Unlock()
		return Batch{}, ErrClosed
	}
	b.Status, b.CancellingAt = StatusCancelling, ptr(s.now())
	s.persistLocked(b)
	if s.running == id {
		// The worker ends it; if it has not set cancelRun yet, it sees the
		// status before it starts.
		if s.cancelRun != nil {
			s.cancelRun(errCancelled)
		}
		defer s.mu.Unlock()
		return *b, nil
	}
	s.mu.Unlock()
	s.finish(id, StatusCancelled, nil)
	return s.Batch(id)
}

// poke tells the worker there may be a batch to run.
func (s *Store) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
