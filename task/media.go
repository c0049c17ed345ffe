package task

import (
	"encoding/hex"
	"errors"
	"sync"

	"superfluid/engine"
	"superfluid/media"
	"superfluid/sched"
)

// Images in prompts, for every API: an API reads its image fields into
// bytes and its text into a prompt whose media markers (Projector.Marker)
// stand for them; MediaPrompt checks the images (package media: before any
// decoding), tokenizes the prompt into text tokens and image spans through
// the model's projector, and returns the sched.Request parts — the prompt
// with placeholders at the images' positions and the spans, each encoded
// on the scheduler's first need of its rows.

// MediaMarker is the text that stands for one image in a prompt (mtmd's
// default marker, which the projector is opened with).
const MediaMarker = "<__media__>"

// Projector is a model's vision projector (the cgo engine's mtmd binding,
// adapted by app). Any goroutine may call it.
type Projector interface {
	// Marker is the text that stands for one image in a prompt.
	Marker() string
	// TokenizeMedia decodes the images and tokenizes text, whose i-th
	// marker stands for images[i], into chunks.
	TokenizeMedia(text string, images [][]byte, addSpecial bool) (MediaChunks, error)
}

// MediaChunks is a prompt tokenized with its images; Free releases it once
// the request has ended (an image is encoded while the request runs).
type MediaChunks interface {
	Chunks() []MediaChunk
	// Encode returns chunk i's rows (an image chunk).
	Encode(i int) ([]float32, error)
	Free()
}

// MediaChunk is text tokens, or an image's Rows (Tokens nil) named by the
// SHA-256 of its bytes.
type MediaChunk struct {
	Tokens []engine.Token
	Rows   int
	Digest string // hex
}

// MediaPrompt is a prompt with images, ready for the scheduler. Its
// native state is counted: the caller holds one reference from
// NewMediaPrompt on (Close drops it), and every submission of it (Spec.Media)
// one more until its job ends, so a plan submitted several times (n
// choices) keeps its images until the last job is done, and the caller may
// drop its own as soon as it has submitted.
type MediaPrompt struct {
	Prompt []engine.Token
	Spans  []sched.MediaSpan
	// Rows is the images' rows together (usage counts them as prompt
	// tokens).
	Rows int

	mu     sync.Mutex
	refs   int
	chunks MediaChunks
}

// retain adds a reference (a submission's).
func (p *MediaPrompt) retain() {
	p.mu.Lock()
	p.refs++
	p.mu.Unlock()
}

// Close drops a reference; the last frees the images.
func (p *MediaPrompt) Close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.refs--
	var free MediaChunks
	if p.refs <= 0 {
		free, p.chunks = p.chunks, nil
	}
	p.mu.Unlock()
	if free != nil {
		free.Free()
	}
}

// NewMediaPrompt checks a request's images and tokenizes text with them;
// field names the request's image field in refusals (a 400 naming it). A
// model without a projector refuses images.
func NewMediaPrompt(m *Model, field, text string, images [][]byte, addBOS bool) (*MediaPrompt, error) {
	if m.Media == nil {
		return nil, BadParam(field, "model %s has no vision projector: it does not take images (serve --mmproj)", m.Name)
	}
	if _, err := media.CheckAll(images); err != nil {
		return nil, BadParam(field, "%s: %v", field, err)
	}
	if err := CheckPromptBytes(m.Desc, "prompt", len(text)); err != nil {
		return nil, err
	}
	mc, err := m.Media.TokenizeMedia(text, images, addBOS && m.Desc.AddBOS)
	if errors.Is(err, engine.ErrClosed) {
		return nil, ErrShutDown
	}
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Status == engine.StatusInvalid {
		return nil, BadParam(field, "%s: %s", field, ee.Msg)
	}
	if err != nil {
		return nil, InternalError("tokenizing a prompt with images: %v", err)
	}
	p := &MediaPrompt{chunks: mc, refs: 1}
	for i, c := range mc.Chunks() {
		if c.Tokens != nil || c.Rows == 0 {
			p.Prompt = append(p.Prompt, c.Tokens...)
			continue
		}
		var digest [32]byte
		if b, err := hex.DecodeString(c.Digest); err == nil && len(b) == len(digest) {
			copy(digest[:], b)
		} else {
			p.Close()
			return nil, InternalError("an image chunk without a SHA-256 id (%q)", c.Digest)
		}
		p.Spans = append(p.Spans, sched.MediaSpan{At: len(p.Prompt), N: c.Rows, Digest: digest,
			Encode: func() ([]float32, error) { return mc.Encode(i) }})
		p.Prompt = append(p.Prompt, make([]engine.Token, c.Rows)...)
		p.Rows += c.Rows
	}
	if n := len(p.Spans); n > 0 && p.Spans[n-1].At+p.Spans[n-1].N >= len(p.Prompt) {
		p.Close()
		return nil, BadParam(field, "%s: the prompt ends with an image; text must follow it", field)
	}
	if err := CheckPrompt(m.Desc, p.Prompt); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// spans are p's spans (none for a nil p).
func (p *MediaPrompt) spans() []sched.MediaSpan {
	if p == nil {
		return nil
	}
	return p.Spans
}

// submitted takes a submission's reference and returns what drops it when
// the job ends (nil for a nil p).
func (p *MediaPrompt) submitted() func() {
	if p == nil {
		return nil
	}
	p.retain()
	return p.Close
}
