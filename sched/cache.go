package sched

import "superfluid/engine"

// Cache is what the scheduler needs from the prefix cache (package kv
// implements it). The scheduler's runner goroutine makes every call, never
// during a Tick, so an implementation needs no locking against it and may
// use the engine's sequence primitives (CopyPrefix, Truncate, Free) freely.
//
// Token slices passed in are never modified by the scheduler afterwards:
// an implementation may keep them without copying.
type Cache interface {
	// Acquire returns a free engine sequence that holds the longest cached
	// prefix of tokens, and that prefix's length, which must be less than
	// len(tokens) (the engine admits a lane only with a token left to
	// prefill). cached may be 0: an empty sequence is a cold start.
	// Acquire is called just before the tick that admits a lane on seq;
	// the sequence belongs to the lane until Release gives it back. An
	// error (no sequence can be freed) makes the scheduler retry on a later
	// tick while lanes are running, or fail the request when none is.
	Acquire(tokens []engine.Token) (seq int32, cached int, err error)

	// Release gives back a sequence Acquire handed out, once its lane is
	// gone from the engine (after the tick that retired it, or at once for
	// a lane no tick admitted). seq holds exactly tokens: the prompt the
	// lane was admitted with, followed by the tokens it generated and fed
	// back; the last sampled token is never in the sequence. The cache
	// publishes it so that a later prompt starting with tokens (the next
	// turn of a conversation, or a preempted request resuming) starts
	// warm, or frees it. tokens may be shorter than the prompt (a lane
	// cancelled mid-prefill) and may be empty.
	Release(seq int32, tokens []engine.Token)

	// Relieve frees KV room after a Tick failed with engine.ErrKVFull, by
	// evicting cached entries no lane uses. It reports false when nothing is
	// left to evict; the scheduler then preempts or fails a lane instead.
	Relieve() bool
}

// RestoringCache is a Cache that reads parked streams off the scheduler's
// goroutine (package kv's does). The scheduler uses it when the cache has
// it: a lane whose best seed is on disk is admitted restoring — it holds
// its lane and sequence but is in no plan — while a reader goroutine reads,
// verifies and decompresses the file, and the other lanes keep stepping;
// the scheduler's goroutine only imports the state.
type RestoringCache interface {
	Cache
	// AcquireRestoring is Acquire, except that when the best seed must be
	// read from disk the sequence comes back empty with restoring true;
	// ready is called, from the reader's goroutine, once the read has
	// ended, and then FinishRestore(seq) imports it.
	AcquireRestoring(tokens []engine.Token, ready func()) (seq int32, cached int, restoring bool, err error)
	// FinishRestore imports the state read for seq and returns how many
	// tokens of the prompt seq holds: 0 when the read or the import failed
	// (seq empty: the lane prefills cold).
	FinishRestore(seq int32) int
}

// The shared-prefix hold (a queued request waiting for a lane about to
// publish a long prefix it shares) needs nothing more from the cache: the
// planner knows every lane's tokens, how much of them the cache held when
// the lane started, and when it will end.
