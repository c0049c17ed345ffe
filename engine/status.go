package engine

import (
	"errors"
	"fmt"
)

// Status is the engine's result code (enum sf_status in superfluid.h).
type Status int32

// Status codes.
const (
	StatusOK          Status = 0
	StatusInvalid     Status = 1
	StatusUnknownLane Status = 2
	StatusLaneExists  Status = 3
	StatusSeqRange    Status = 4
	StatusSeqBusy     Status = 5
	StatusPastPrompt  Status = 6
	StatusContext     Status = 7
	StatusKVFull      Status = 8
	StatusBatch       Status = 9
	StatusState       Status = 10
	StatusBuffer      Status = 11
	StatusModel       Status = 12
	StatusDecode      Status = 13
	StatusUnsupported Status = 14
	StatusTemplate    Status = 15
	StatusException   Status = 16 // a C++ exception caught at the ABI
	StatusClosed      Status = 17 // the engine is closed
	StatusGrammar     Status = 18 // a grammar that does not parse
)

var statusNames = [...]string{
	"ok", "invalid", "unknown lane", "lane exists", "sequence out of range", "sequence busy",
	"past the prompt", "context exceeded", "KV cache full", "batch exceeded", "bad state",
	"buffer too small", "model", "decode failed", "unsupported", "template",
	"exception", "closed", "grammar",
}

func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status %d", int32(s))
}

// Error is a failed engine call: its status and the engine's message.
// A tick refused because of one lane's entry names that lane (HasLane,
// Lane), so the scheduler can fail that lane alone and plan again; without
// it the whole plan is at fault.
type Error struct {
	Status  Status
	Op      string
	Msg     string
	Lane    uint32
	HasLane bool
}

// FaultLane reports the lane an engine error blames, if it blames one.
func FaultLane(err error) (uint32, bool) {
	var e *Error
	if errors.As(err, &e) && e.HasLane {
		return e.Lane, true
	}
	return 0, false
}

func (e *Error) Error() string {
	if e.Msg == "" {
		return fmt.Sprintf("engine: %s: %s", e.Op, e.Status)
	}
	return fmt.Sprintf("engine: %s: %s", e.Op, e.Msg)
}

// Is makes errors.Is(err, ErrKVFull) and friends match on status.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Status == e.Status
}

// Sentinels for errors.Is.
var (
	ErrInvalid     = &Error{Status: StatusInvalid}
	ErrUnknownLane = &Error{Status: StatusUnknownLane}
	ErrSeqRange    = &Error{Status: StatusSeqRange}
	ErrSeqBusy     = &Error{Status: StatusSeqBusy}
	ErrPastPrompt  = &Error{Status: StatusPastPrompt}
	ErrContext     = &Error{Status: StatusContext}
	ErrKVFull      = &Error{Status: StatusKVFull}
	ErrBatch       = &Error{Status: StatusBatch}
	ErrState       = &Error{Status: StatusState}
	ErrUnsupported = &Error{Status: StatusUnsupported}
	ErrTemplate    = &Error{Status: StatusTemplate}
	ErrException   = &Error{Status: StatusException}
	ErrClosed      = &Error{Status: StatusClosed}
	ErrGrammar     = &Error{Status: StatusGrammar}
)
