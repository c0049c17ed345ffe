// Package kv is the prefix cache: it remembers which engine sequences hold
// which token streams, so that a prompt starting with a cached stream (the
// next turn of a conversation, a shared system prompt, a preempted request
// resuming) is admitted warm and prefills only what follows.
//
// The index is a radix tree over token ids. A radix tree rather than
// vLLM-style hashed blocks because the engine's unit of sharing is a token
// prefix of any length, not a block: llama.cpp's unified KV cache lets a
// sequence share the cells of any prefix of another (llama_memory_seq_cp),
// so the cache can seed a lane with exactly the longest common prefix — a
// block hash would round every match down to a block boundary and need a
// block size tuned per workload. The tree walk costs one comparison per
// prompt token, which is noise beside prefilling a single one.
//
// Tiers: entries are resident (an engine sequence holds the tokens' KV
// cells); evicted entries may be exported to host memory within a byte
// budget and imported back on a match; entries leaving host memory (or the
// pool, when host memory is off or too small for them) are parked on disk
// by package park, and so is every published stream with Config.ParkEager,
// every entry idle for Config.ParkIdle, and everything at Close. Parked
// files found at start-up are entries from the first call, so a
// conversation resumes warm after a restart. A prompt takes the longest
// match of any tier (the cheapest tier on a tie); a parked stream longer
// than the match is restored and truncated to it.
//
// Eviction is least-recently-used, except that prefixes two or more requests
// have shared go last: evicting an entry whose beginning others share cuts
// it back to that shared prefix instead of dropping it. An entry that is a
// strict prefix of another is dropped at once — the longer entry serves every
// prompt the shorter one would, with the same cells.
//
// Sliding-window and hybrid models cannot be cut anywhere: partial.go
// cuts only where the engine allows and resumes from checkpoints of the
// partial state elsewhere, else falls back to a shorter prefix or cold.
//
// One goroutine (the scheduler's) owns a Cache; nothing here locks.
package kv
