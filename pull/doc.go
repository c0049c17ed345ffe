// Package pull fetches GGUF model files into a models directory and finds
// them again by name, so that `--model` can say `qwen2.5-0.5b-instruct-q4_k_m`
// or `hf.co/Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M` instead of a path.
//
// A reference is a Hugging Face file (`hf.co/ORG/REPO:FILE`, where FILE may
// also be a quantization tag such as Q4_K_M, resolved through the Hub's API)
// or a plain http(s) URL. Model files are large and connections drop, so a
// download goes to NAME.gguf.partial beside a small JSON file recording
// where the bytes came from (URL, validator, expected size and digest); the
// next attempt — a retry after a reset connection, or the next `pull` after
// Ctrl-C — asks only for the rest (Range, guarded by If-Range so that a
// file changed on the server restarts instead of being spliced).
//
// Nothing unverified takes a model's name. The first four bytes must be
// the GGUF magic (an HTML error page is refused as soon as it starts), the
// size and sha256 must match what the server announced (Hugging Face's
// X-Linked-Size and X-Linked-Etag) or what the user gave, and the header
// must parse with package gguf. Only then is the file renamed to NAME.gguf,
// with NAME.gguf.json beside it saying where it came from; a file that
// fails is removed.
//
// A models directory may also hold GGUF files copied in by hand: they are
// listed and resolved by name like pulled ones, just without a source.
package pull
