// Package session is the durable store of conversations: ordered items
// (messages, tool calls and their results, reasoning) that the server keeps
// across requests and restarts, and the records of prefix-cache pins that
// must outlive a restart.
//
// Every change is one record appended to a write-ahead log (wal.go) and
// made durable before the call returns; concurrent writers share one write
// and one fsync (group commit, committer.go). An item is written once, in
// the record that adds it; a conversation holds references to items, so a
// fork writes no item again and a long chain costs disk linear in its
// length. When the log outgrows a bound the live state is written to a
// snapshot and a fresh log begun (compact.go); what was deleted, expired or
// is referenced by no conversation is dropped then.
//
// Deciding and doing are apart: state.go holds the in-memory state and the
// one function that applies an event to it, used alike by a live write and
// by recovery; the methods (conversations.go, pins.go) check a request and
// build its event, and Store.change applies it, queues its record and
// waits for the committer. A read may see a write whose fsync is still
// running; a write that fails stops every later one (Stats.Failed).
// Nothing here builds a path from user input: the files are named by the
// store alone, and every id is checked before it is looked up.
//
// On Open the snapshot is read and the log replayed; a torn or corrupt tail
// (a short record, a bad checksum, a record that does not decode or apply)
// ends the replay there, and the file is truncated to the last good record:
// nothing after a bad record is applied. Stats counts what was dropped.
package session
