package sched

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"superfluid/engine"
)

// Media: an image in a prompt is a span of embedding rows (a vision
// projector's output) at positions the prompt reserves for it. The
// scheduler treats them as prompt rows — in the step budget, chunked,
// preemptible — except that a llama_batch carries tokens or rows, never
// both, so a step's row chunk runs as its own decode right after the
// step's tick (engine.RowPrefiller). A text chunk stops at a span's start,
// a row chunk at its end.
//
// The rows are encoded on first need (MediaSpan.Encode, on the runner's
// goroutine, inside the step that prefills them), so a warm image — its
// span already in the cache — is never encoded again.
//
// Warm by digest: the job's prompt, as the prefix cache and park see it,
// holds at a span's positions tokens derived from the image's SHA-256 and
// the row's index (mediaKeyTokens): the same image at the same place of
// the same conversation is the same key, any other image another one, and
// a span cut short (a preempted lane, a cache that kept part of a stream)
// is still a valid prefix: its rows continue where the cache left off.
// The tokens are negative, below -mediaKeyBase: disjoint from every
// vocabulary's tokens (non-negative) and from LoRA namespaces' text tags,
// which newCacheNamespaces keeps above it. The media key space is cut into
// 1 + maxCacheNamespaces equal ranges, the first the base model's, range
// 1 + ns the namespace ns's (namespaces.go moves a key into its job's
// range): an image's rows computed under one adapter set — whose KV the
// adapters change, as a text token's — never key another set's, by
// construction rather than by hash. They depend on the image (and the
// set's name) alone, not on the process, so a parked conversation with an
// image restores after a restart. The
// engine's copy of the prompt holds placeholder token 0 there instead: it
// never decodes those positions as tokens.

// MediaSpan is one image of a Request: N rows at prompt positions
// [At, At+N), whose Encode returns the N × RowWidth floats. Digest is the
// SHA-256 of the image file's bytes.
type MediaSpan struct {
	At, N  int
	Digest [32]byte
	Encode func() ([]float32, error)
}

// mediaKeyBase: media key tokens are -(mediaKeyBase + x), x in
// [0, mediaKeyBase - 1): all of them fit int32 and lie below every LoRA tag.
// mediaKeyRange is each namespace's share of x: the base model's keys are
// x in [0, mediaKeyRange), namespace ns's [(1+ns)·mediaKeyRange, +range).
const (
	mediaKeyBase  = 1 << 30
	mediaKeyRange = (mediaKeyBase - 1) / (1 + maxCacheNamespaces)
)

// mediaKeyTokens are the cache's tokens for an image's n rows.
func mediaKeyTokens(digest [32]byte, n int) []engine.Token {
	seed := binary.LittleEndian.Uint64(digest[:8]) ^ binary.LittleEndian.Uint64(digest[8:16])
	out := make([]engine.Token, n)
	for i := range out {
		// splitmix64 of the digest and the row's index.
		z := seed + uint64(i+1)*0x9e3779b97f4a7c15
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		out[i] = engine.Token(-(mediaKeyBase + int64(z%mediaKeyRange)))
	}
	return out
}

// mediaSpan is a job's span and, once encoded, its rows.
type mediaSpan struct {
	MediaSpan
	rows []float32
}

// rowChunk is a step's prefill of rows [from, from+n) of a lane's prompt,
// inside span.
type rowChunk struct {
	lane *lane
	span *mediaSpan
	from int
	n    int
}

// validateMedia checks a request's spans: in order, apart, each with rows
// to give, none reaching the prompt's last position (the first token is
// sampled from a token row).
func (r *Request) validateMedia() error {
	end := 0
	for i, s := range r.Media {
		switch {
		case s.N <= 0 || s.Encode == nil:
			return fmt.Errorf("sched: media span %d has no rows", i)
		case s.At < end:
			return fmt.Errorf("sched: media span %d at %d overlaps or precedes the one before it", i, s.At)
		case s.At+s.N >= len(r.Prompt):
			return fmt.Errorf("sched: media span %d [%d, +%d) reaches the end of a %d-token prompt", i, s.At, s.N, len(r.Prompt))
		}
		end = s.At + s.N
	}
	return nil
}

// inSpan reports whether prompt position i lies in one of the spans.
func inSpan(spans []MediaSpan, i int) bool {
	for _, s := range spans {
		if i >= s.At && i < s.At+s.N {
			return true
		}
	}
	return false
}

// keyMedia writes the spans' key tokens into the job's prompt.
func (j *job) keyMedia(spans []MediaSpan) {
	for _, s := range spans {
		j.media = append(j.media, &mediaSpan{MediaSpan: s})
		copy(j.prompt[s.At:s.At+s.N], mediaKeyTokens(s.Digest, s.N))
	}
}

// enginePrompt is the job's prompt as the engine takes it: placeholders
// (token 0) at the spans' positions.
func (j *job) enginePrompt() []engine.Token {
	if len(j.media) == 0 {
		return j.prompt
	}
	out := append([]engine.Token(nil), j.prompt...)
	for _, s := range j.media {
		clear(out[s.At : s.At+s.N])
	}
	return out
}

// spanAt is the span holding prompt position i, or nil; next is the start
// of the first span after i (len(prompt) when none).
func (j *job) spanAt(i int) (in *mediaSpan, next int) {
	next = len(j.prompt)
	for _, s := range j.media {
		if i >= s.At && i < s.At+s.N {
			return s, next
		}
		if s.At > i {
			return nil, s.At
		}
	}
	return nil, next
}

// chunkLimit is the most prompt rows the lane's next chunk may take, and
// the span it is in when those are rows.
func (l *lane) chunkLimit() (int, *mediaSpan) {
	s, next := l.job.spanAt(l.prefilled)
	if s != nil {
		return s.At + s.N - l.prefilled, s
	}
	return next - l.prefilled, nil
}

// prefillRows runs the step's row chunks after its tick: each span's rows
// encoded on first need, then prefilled. A lane whose rows fail ends with
// the error; the others go on.
func (l *loop) prefillRows(end time.Time) {
	p := l.p
	chunks := p.rowChunks
	p.rowChunks = p.rowChunks[:0]
	if len(chunks) == 0 {
		return
	}
	rp, ok := l.eng.(engine.RowPrefiller)
	for _, c := range chunks {
		ln := c.lane
		if ln.finishing || !ln.admitted || ln.prefilled != c.from {
			continue
		}
		if !ok {
			p.finishLane(ln, FinishError, fmt.Errorf("sched: this engine does not prefill media rows"), end)
			continue
		}
		if err := l.encodeSpan(c.span); err != nil {
			p.finishLane(ln, FinishError, err, end)
			continue
		}
		w := rp.RowWidth()
		off := c.from - c.span.At
		if len(c.span.rows) != c.span.N*w {
			p.finishLane(ln, FinishError, fmt.Errorf("sched: an image encoded to %d floats, want %d rows of %d", len(c.span.rows), c.span.N, w), end)
			continue
		}
		if err := rp.PrefillRows(ln.tag, c.span.rows[off*w:(off+c.n)*w]); err != nil {
			p.finishLane(ln, FinishError, fmt.Errorf("sched: prefilling an image's rows: %w", err), end)
			continue
		}
		ln.prefilled += c.n
		ln.npast += c.n
		p.stats.prefillTokens.Add(uint64(c.n))
	}
}

// encodeSpan encodes a span's rows unless it has them; a panic in the
// encoder is the span's error.
func (l *loop) encodeSpan(s *mediaSpan) (err error) {
	if s.rows != nil {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("sched: encoding an image panicked: %v", v)
		}
	}()
	rows, err := s.Encode()
	if err != nil {
		return fmt.Errorf("sched: encoding an image: %w", err)
	}
	s.rows = rows
	return nil
}

// endMedia runs an ended job's MediaDone once; a panic in it is logged,
// not the runner's.
func (l *loop) endMedia(j *job) {
	done := j.mediaDone
	if done == nil {
		return
	}
	j.mediaDone = nil
	defer func() {
		if v := recover(); v != nil {
			l.p.cfg.Logger.Error("sched: freeing a request's images panicked", "panic", v)
		}
	}()
	done()
}

// MediaKeyTokens are the prefix cache's tokens for n rows of the image
// whose SHA-256 is digest.
func MediaKeyTokens(digest [32]byte, n int) []engine.Token { return mediaKeyTokens(digest, n) }

// KeyedPrompt is prompt as the prefix cache keys it: each span's positions
// hold its image's key tokens instead of placeholders. A prefix of it is
// what a cache pin of a prompt with images names.
func KeyedPrompt(prompt []engine.Token, spans []MediaSpan) []engine.Token {
	if len(spans) == 0 {
		return prompt
	}
	out := slices.Clone(prompt)
	for _, s := range spans {
		if s.At >= 0 && s.N > 0 && s.At+s.N <= len(out) {
			copy(out[s.At:s.At+s.N], mediaKeyTokens(s.Digest, s.N))
		}
	}
	return out
}
