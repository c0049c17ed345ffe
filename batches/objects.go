package batches

import (
	"errors"
	"fmt"
)

// File is OpenAI's File object.
type File struct {
	ID        string `json:"id"`
	Object    string `json:"object"` // "file"
	Bytes     int64  `json:"bytes"`
	CreatedAt int64  `json:"created_at"`
	Filename  string `json:"filename"`
	Purpose   string `json:"purpose"`
	// Status is always "processed": a file is listed only once its content
	// is on disk. OpenAI deprecated the field but its clients require it.
	Status string `json:"status"`
}

// File purposes.
const (
	PurposeBatch       = "batch"        // a batch's input
	PurposeBatchOutput = "batch_output" // a batch's output or error file
	PurposeUserData    = "user_data"    // anything; accepted and kept
	PurposeVision      = "vision"       // an image a Responses input_image names by file_id
)

// Status is a batch's state.
type Status string

// The states of a batch, as OpenAI names them.
const (
	StatusValidating Status = "validating"
	StatusFailed     Status = "failed"
	StatusInProgress Status = "in_progress"
	StatusFinalizing Status = "finalizing"
	StatusCompleted  Status = "completed"
	StatusExpired    Status = "expired"
	StatusCancelling Status = "cancelling"
	StatusCancelled  Status = "cancelled"
)

// Finished reports a state a batch never leaves.
func (s Status) Finished() bool {
	switch s {
	case StatusFailed, StatusCompleted, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// Batch is OpenAI's Batch object. Optional fields are pointers so that they
// read null until set, as OpenAI's do; a pointer, once set, is never
// written through (snapshots share them).
type Batch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"` // "batch"
	Endpoint         string            `json:"endpoint"`
	Errors           *Errors           `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           Status            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    RequestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
}

// Errors is why a batch failed: {"object": "list", "data": [...]}.
type Errors struct {
	Object string       `json:"object"`
	Data   []BatchError `json:"data"`
}

// BatchError is one reason a batch failed.
type BatchError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// RequestCounts counts a batch's requests: Completed got a 2xx answer,
// Failed got anything else (an error record, a 4xx or 5xx answer).
type RequestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Page is one page of a list: {"object": "list", "data", "first_id",
// "last_id", "has_more"}; the next page is asked for with after=last_id.
type Page[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// BatchParams is the body of POST /v1/batches.
type BatchParams struct {
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
}

// ListParams select a page of a list.
type ListParams struct {
	After string // the id the page starts after; "" for the first page
	Limit int    // 0: the list's default
	// Order is "asc" or "desc" (newest first, the default); files only.
	Order string
	// Purpose keeps only files of this purpose; files only.
	Purpose string
}

// ErrNotFound is wrapped by the errors of lookups of an unknown id.
var ErrNotFound = errors.New("not found")

// ErrClosed is returned by changes asked of a closed store (the server is
// shutting down).
var ErrClosed = errors.New("batches: the store is closed")

// InvalidError is a request the store refuses: the client must change it.
type InvalidError struct {
	Param string // the offending field; "" when none
	Msg   string
}

func (e *InvalidError) Error() string { return e.Msg }

func invalid(param, format string, args ...any) error {
	return &InvalidError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// notFoundError reads as its message alone (it is what the client sees)
// and is ErrNotFound to errors.Is.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

func notFound(format string, args ...any) error {
	return &notFoundError{fmt.Sprintf(format, args...)}
}

func ptr[T any](v T) *T { return &v }
