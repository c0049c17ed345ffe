// Package park is the prefix cache's disk tier: a conversation's exported
// KV state, zstd-compressed, in a file named by the digest of the tokens it
// covers, so that a returning turn — even after a restart — imports it
// instead of prefilling its whole prompt again.
//
// A park file is a header (format, model identity, KV type, the token list
// and its sha256, encoding, lengths, a checksum over the compressed payload
// and one over the header itself) followed by the payload. The token list
// sits in the header so that start-up can index the directory by reading
// headers only: a 2,000-token header is 8 KB, its payload 20 MB.
//
// Nothing unverified reaches the engine. A file from another model or KV
// type, a truncated file, a flipped byte anywhere, a token list that does
// not match its digest or its name: each is refused with a reason, counted,
// and removed, and the caller prefills cold. The engine's own blob header
// (model, KV type, FNV checksum; native/seq.cpp) is a second line behind
// this one.
//
// Writes go through one goroutine behind a bounded queue: a full queue drops
// the write (counted) rather than slowing the scheduler. A file appears
// under its final name only complete and synced (temporary name in the same
// directory, fsync, rename, fsync of the directory), so a crash mid-write
// leaves at most a temporary file, which the next start-up removes. A byte
// budget removes the least recently used files first.
//
// A Store is owned by one goroutine (the prefix cache's, which is the
// scheduler's) for Put, Load, Remove, Gone and Close; Stats, List and Info
// may be read from any goroutine.
package park
