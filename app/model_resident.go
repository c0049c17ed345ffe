package app

import (
	"superfluid/engine"
	"superfluid/gguf"
)

// residentIdleTokens is how many tokens of idle cached conversations a
// full-attention model keeps in its KV pool when a host tier can take the
// rest. llama.cpp's unified pool attends over every cell below the highest
// one in use and masks the other sequences' cells, and its CPU
// flash-attention kernel reads the mask of every tile before it can skip
// one: each resident cell costs every prompt row. Measured on the 2-core
// machine (cgo BenchmarkPrefillBesideResident, synth qwen3moe small f16,
// rounds paired), a 2,000-token prompt prefilled at 0.82× the empty pool's
// rate beside 2,000 resident cells, 0.73× beside 4,000 and 0.70× beside
// 6,000; moving a 2,000-token sequence to host memory and back took 0.6%
// of its prefill (BenchmarkHostRoundTrip). So idle entries go to host
// memory, and only short ones (a padding block of cells) stay in the pool.
const residentIdleTokens = 256

// residentBudget is the cache's MaxResidentTokens for a model: a padding
// block of idle tokens where a host tier takes evicted entries without
// loss (every layer keeps a cell per token, so a restored entry cuts
// anywhere); half the context otherwise. A sliding-window model's host
// copy keeps only the last window and a recurrent one's the whole length,
// so moving them out of the pool loses the cuts a diverging prompt needs
// (they then resume from a checkpoint); without a host tier an evicted
// entry is gone.
func residentBudget(desc *engine.Descriptor, hostBytes int64) int {
	if hostBytes > 0 && desc.Partial == engine.PartialNone {
		return min(residentIdleTokens, desc.Ctx/2)
	}
	return desc.Ctx / 2
}

// windowResidentShare is the share of the context a sliding-window model's
// idle entries may hold resident (kv's MaxWindowResidentTokens) when no
// host tier takes them: evicted, they are gone, so they are held to more
// than half. But not to all: each resident cell costs every later step,
// and a pool left full makes steps fail and be retried. The quarter left
// over takes the next prompt without relieving the pool first.
const windowResidentShare = 3.0 / 4

// windowResidentBudget is the cache's MaxWindowResidentTokens for a
// model: 0 (unused) unless it has a sliding window. With a host tier, the
// idle budget of a full-attention model: the entry a conversation just
// published, and the one a prompt is seeded from, stay in the pool over
// it (kv), so the conversation's own edits still cut anywhere, and the
// other conversations' entries wait in host memory, where an edit further
// back than the window resumes from a checkpoint (as in llama-server,
// which keeps only the slot it serves in its pool). Kept resident up to
// three quarters of the context instead, they stretched every step's
// attention: measured on synth gemma4 small (bench/families.sh, 5
// conversations), the steps of a cold prompt spanned up to 7,087 cells
// where llama-server's spanned 2,156, and cold prompts took 1.35× and
// edits 1.2× llama-server's time (issue 22).
func windowResidentBudget(desc *engine.Descriptor, hostBytes int64) int {
	if desc.Partial != engine.PartialSWA {
		return 0
	}
	if hostBytes > 0 {
		return min(residentIdleTokens, desc.Ctx/2)
	}
	return int(float64(desc.Ctx) * windowResidentShare)
}

// engineSeqs is the number of engine sequences a model's context opens
// with: o.Seqs when set, else 4 per lane (each lane's own, and cached
// conversations beside them), or 2 beside the lanes on a sliding-window
// model. llama.cpp sizes a unified context's window cache as the window
// times the sequences plus a micro-batch, and fills its free cells before
// it reuses the ones that slid out of a window: each step's window layers
// attend over every cell below the highest filled. At 16 sequences of a
// 512-token window the window cache was as big as an 8,192-token
// context, and a cold 2,000-token prompt on synth gemma4 small took 1.30×
// llama-server's time (-np 4: 2,560 cells; bench/families.sh, paired
// conversations); at lanes + 2 it took 0.99–1.03×. The window model keeps only
// the conversation being served resident anyway (windowResidentBudget),
// and the cache evicts an entry when it needs a sequence.
func engineSeqs(path string, o Options) int {
	switch {
	case o.Seqs > 0:
		return o.Seqs
	case slidingWindow(path) > 0:
		return o.Lanes + 2
	default:
		return 4 * o.Lanes
	}
}

// slidingWindow is the attention window a model file's header declares
// (0: none, or the file cannot be read).
func slidingWindow(path string) uint64 {
	f, err := gguf.Open(path)
	if err != nil {
		return 0
	}
	arch, _ := f.String("general.architecture")
	return ggufUint(f, arch+".attention.sliding_window")
}
