package sched

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"superfluid/engine"
)

// Finish says why a request ended.
type Finish uint8

// Finish reasons.
const (
	FinishNone      Finish = iota
	FinishEOG              // the model ended generation
	FinishLength           // MaxTokens reached
	FinishContext          // the sequence filled the context
	FinishStop             // one of the request's StopTokens
	FinishCancelled        // Cancel, or the Submit context ended
	FinishDeadline         // the request's deadline passed
	FinishError            // Result.Err says what failed
	FinishGrammar          // the request's grammar is complete
)

var finishNames = [...]string{"none", "eog", "length", "context", "stop", "cancelled", "deadline", "error", "grammar"}

func (f Finish) String() string {
	if int(f) < len(finishNames) {
		return finishNames[f]
	}
	return "unknown"
}

// finishOf maps the engine's reason onto the scheduler's.
func finishOf(f engine.Finish) Finish {
	switch f {
	case engine.FinishEOG:
		return FinishEOG
	case engine.FinishLength:
		return FinishLength
	case engine.FinishContext:
		return FinishContext
	case engine.FinishError:
		return FinishError
	case engine.FinishGrammar:
		return FinishGrammar
	}
	return FinishNone
}

// Token is one generated token as a Stream delivers it.
type Token struct {
	Token   engine.Token
	Logprob float32             // when Request.Logprobs > 0
	Top     []engine.TopLogprob // the top Request.Logprobs alternatives
}

// Result is how a request ended.
type Result struct {
	Finish Finish
	// Err is set when the request failed rather than ended: ErrDeadline,
	// ErrCancelled or ErrClosed before it started, or an engine error.
	Err error
	// PromptTokens is the request's prompt length.
	PromptTokens int
	// CachedTokens is how much of the prompt the prefix cache already held
	// when the request was first admitted (the warm prefix).
	CachedTokens int
	// Generated is the tokens delivered.
	Generated int
	// Preemptions counts the times a better class took the request's lane;
	// it resumed where it stopped each time.
	Preemptions int
	// DraftTokens is the draft tokens speculative decoding verified for the
	// request and DraftAccepted how many of them it accepted (llama.cpp's
	// timings.draft_n and draft_n_accepted).
	DraftTokens, DraftAccepted int
	// QueueWait is from Submit to the first admission; TTFT from Submit to
	// the first token's delivery; Prefill from the first admission to the
	// first token; Decode from the first token to the end.
	QueueWait, TTFT, Prefill, Decode time.Duration
}

// Stream is one submitted request: its tokens as they are produced, then
// its Result. One goroutine reads it; Cancel may be called from any.
type Stream struct {
	id    uint64
	class Class

	// cancelled is raised by Cancel; the runner reads it when it plans
	// each step, so a running request stops within the step in flight.
	cancelled atomic.Bool
	// started is raised when the request first holds a lane.
	started atomic.Bool
	stopCtx func() bool // stops the context.AfterFunc that cancels on ctx

	mu       sync.Mutex
	buf      []Token
	head     int
	finished bool
	result   Result
	notify   chan struct{} // a token or the end arrived
	done     chan struct{} // closed with the result
}

func newStream(id uint64, class Class) *Stream {
	return &Stream{id: id, class: class, notify: make(chan struct{}, 1), done: make(chan struct{})}
}

// ID names the request for Scheduler.Cancel.
func (s *Stream) ID() uint64 { return s.id }

// Cancel stops the request: a queued one never starts, a running one
// stops within one engine step. Its Result says FinishCancelled. Cancel
// after the end does nothing.
func (s *Stream) Cancel() { s.cancelled.Store(true) }

// Started reports whether the request has held a lane: it is no longer
// only waiting in a queue.
func (s *Stream) Started() bool { return s.started.Load() }

// Next returns the next token, or io.EOF once the request has ended and
// every token was read (Result then tells how it ended), or ctx's error.
func (s *Stream) Next(ctx context.Context) (Token, error) {
	for {
		s.mu.Lock()
		if s.head < len(s.buf) {
			t := s.buf[s.head]
			s.buf[s.head] = Token{}
			s.head++
			if s.head == len(s.buf) {
				s.buf, s.head = s.buf[:0], 0
			}
			s.mu.Unlock()
			return t, nil
		}
		fin := s.finished
		s.mu.Unlock()
		if fin {
			return Token{}, io.EOF
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Token{}, ctx.Err()
		}
	}
}

// Done is closed when the request has ended; tokens may still be unread.
func (s *Stream) Done() <-chan struct{} { return s.done }

// Result is how the request ended; valid once Done is closed.
func (s *Stream) Result() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.result
}

// Collect reads every token and the result: for callers that do not stream.
func (s *Stream) Collect(ctx context.Context) ([]Token, Result, error) {
	var out []Token
	for {
		t, err := s.Next(ctx)
		if err == io.EOF {
			return out, s.Result(), nil
		}
		if err != nil {
			return out, Result{}, err
		}
		out = append(out, t)
	}
}

// push delivers a token. Runner goroutine only; never blocks.
func (s *Stream) push(t Token) {
	s.mu.Lock()
	s.buf = append(s.buf, t)
	s.mu.Unlock()
	s.wake()
}

// finish delivers the result. Runner goroutine only, once.
func (s *Stream) finish(r Result) {
	if s.stopCtx != nil {
		s.stopCtx()
	}
	s.mu.Lock()
	s.finished = true
	s.result = r
	s.mu.Unlock()
	close(s.done)
	s.wake()
}

func (s *Stream) wake() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}
