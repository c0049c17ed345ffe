// Package park is the prefix cache's disk tier: a conversation's exported
// KV state, zstd-compressed, in a file named by the digest of the tokens it
// covers, so that a returning turn — even after a restart — imports it
// instead of prefilling its whole prompt again.
//
// A park file is a header (format, model identity, K and V cache types, V
// cache layout, the LoRA adapter set the stream was computed under, the
// token list and its sha256, encoding, lengths, a checksum over
// the compressed payload and one over the header itself) followed by the
// payload — and, since format version 3, by the stream's checkpoints of
// partial state (a sliding-window or hybrid model's; kv/partial.go), each
// a record in the checksummed header and a payload of its own. Version 2
// files (no checkpoints) are still read. The token list sits in the header so that start-up can index
// the directory by reading headers only: a 2,000-token header is 8 KB, its
// payload 20 MB.
//
// The state's identity is the model, the K and V cache types and the V
// layout (transposed unless flash attention runs; a state of one layout
// does not import into a cache of the other). Each identity parks in its own
// subdirectory of the park directory, named for people to read: the
// identity's first 12 hex digits, the cache types (one name when K and V
// share it, else "q8_0-f16") and the layout, e.g.
// "5f2b9c0e7d41-f16-vrows" (Subdir). Servers of several models share the
// default directory, at the same time if need be — the lock is per
// subdirectory — and none touches another's files. The byte budget is per
// identity too: a budget shared by all would let one model's
// conversations sweep another's out, which is exactly the loss the
// subdirectories exist to prevent; the disk the directory takes is at
// most the budget times the models served. Files an older build wrote in
// the directory itself (the flat layout) are moved into their identity's
// subdirectory when that identity next opens it (migrate.go); everything
// else there is left alone.
//
// Nothing unverified reaches the engine. A truncated file, a flipped byte
// anywhere, a token list that does not match its digest or its name, a
// state whose V layout is not its header's: each is refused with a reason,
// counted, removed, and the caller prefills cold; a damaged checkpoint
// refuses its whole file. A sound file of another format version
// (version 1 did not record the V layout; a newer one) or another
// identity, found in this identity's subdirectory, is refused and counted
// but left alone. A refused name is remembered: a later match does not
// read, checksum or decompress it again, and neither does one the engine
// would not import (Unusable) — that file stays on disk for the next run,
// since the engine may only have been short of KV cells. The engine's own
// blob header (model, KV type, FNV checksum; native/seq.cpp) is a second
// line behind this one.
//
// Writes go through one goroutine behind a bounded queue: a full queue drops
// the write (counted) rather than slowing the scheduler. A file appears
// under its final name only complete and synced (temporary name in the same
// directory, fsync, rename, fsync of the directory), so a crash mid-write
// leaves at most a temporary file, which the next start-up removes. A byte
// budget removes the identity's least recently used files first.
//
// A Store is owned by one goroutine (the prefix cache's, which is the
// scheduler's) for Put, Load, Refuse, Unusable, Holds, Gone and Close;
// Stats and List may be read from any goroutine.
package park
