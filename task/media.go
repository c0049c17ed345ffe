package task

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"superfluid/engine"
	"superfluid/media"
	"superfluid/sched"
)

// Images and audio in prompts, for every API: an API reads its image and
// audio fields into bytes and its text into a prompt whose media markers
// (Projector.Marker) stand for them; MediaPrompt checks the files (package
// media: before any decoding), tokenizes the prompt into text tokens and
// media spans through the model's projector, and returns the sched.Request
// parts — the prompt with placeholders at the files' positions and the
// spans, each encoded on the scheduler's first need of its rows. An audio
// file is a span per 30-second window.

// MediaMarker is the text that stands for one image or audio file in a
// prompt (mtmd's default marker, which the projector is opened with).
const MediaMarker = "<__media__>"

// Projector is a model's projector (the cgo engine's mtmd binding, adapted
// by app): a vision encoder, an audio encoder or both. Any goroutine may
// call it.
type Projector interface {
	// Marker is the text that stands for one file in a prompt.
	Marker() string
	// Modalities says which encoders the projector has.
	Modalities() (vision, audio bool)
	// AudioWindowRows is the rows of one 30-second audio window (0
	// without an audio encoder).
	AudioWindowRows() int
	// AudioRefused says why a projector's audio encoder is not used (the
	// engine would abort encoding its windows), or "": Modalities then
	// reports no audio, and audio is refused saying this.
	AudioRefused() string
	// TokenizeMedia decodes the files (images or audio) and tokenizes
	// text, whose i-th marker stands for files[i], into chunks.
	TokenizeMedia(text string, files [][]byte, addSpecial bool) (MediaChunks, error)
}

// Hears reports whether the model takes audio.
func (m *Model) Hears() bool {
	if m.Media == nil {
		return false
	}
	_, audio := m.Media.Modalities()
	return audio
}

// AudioRefusal says why the model does not take audio, or "" when it does:
// no projector, a projector without an audio encoder, or one whose audio
// encoder the engine refused at load (Projector.AudioRefused).
func (m *Model) AudioRefusal() string {
	switch {
	case m.Media == nil:
		return "it has no projector (serve --mmproj)"
	case m.Hears():
		return ""
	}
	if why := m.Media.AudioRefused(); why != "" {
		return "its projector has no audio encoder it can use: " + why
	}
	return "its projector has no audio encoder"
}

// Sees reports whether the model takes images.
func (m *Model) Sees() bool {
	if m.Media == nil {
		return false
	}
	vision, _ := m.Media.Modalities()
	return vision
}

// MediaChunks is a prompt tokenized with its images; Free releases it once
// the request has ended (an image is encoded while the request runs).
type MediaChunks interface {
	Chunks() []MediaChunk
	// Encode returns chunk i's rows (an image chunk).
	Encode(i int) ([]float32, error)
	Free()
}

// MediaChunk is text tokens, or a media file's Rows (Tokens nil) named by
// the SHA-256 of its bytes and its Segment among the file's chunks (an
// audio file's 30-second windows share its digest).
type MediaChunk struct {
	Tokens  []engine.Token
	Rows    int
	Digest  string // hex
	Segment int
}

// chunkKey is what the prefix cache keys a media chunk's rows by: the
// file's digest for its first chunk (an image's only one), for a later
// segment a digest of the file's digest and the segment's number, so two
// windows of one audio never share keys.
func chunkKey(c MediaChunk) ([32]byte, bool) {
	var digest [32]byte
	b, err := hex.DecodeString(c.Digest)
	if err != nil || len(b) != len(digest) {
		return digest, false
	}
	copy(digest[:], b)
	if c.Segment == 0 {
		return digest, true
	}
	return sha256.Sum256(binary.LittleEndian.AppendUint64(append(digest[:], "segment"...), uint64(c.Segment))), true
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
	// Rows is the media's rows together (usage counts them as prompt
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

// audioWindows is the fewest 30-second windows mtmd cuts audio of length
// d into: it pads the samples with 30 seconds of silence and keeps the
// whole windows, so floor(d / 30 s) + 1. The second taken off first leaves
// room for a decoded length a little short of the header's (an MP3's
// encoder delay), so this never overcounts.
func audioWindows(d time.Duration) int {
	return int(max(d-time.Second, 0)/(30*time.Second)) + 1
}

// NewMediaPrompt checks a request's images and audio and tokenizes text
// with them; field names the request's media field in refusals (a 400
// naming it). A model without a projector refuses both, one without an
// audio (vision) encoder audio (images).
func NewMediaPrompt(m *Model, field, text string, images [][]byte, addBOS bool) (*MediaPrompt, error) {
	if m.Media == nil {
		return nil, BadParam(field, "model %s has no projector: it does not take images or audio (serve --mmproj)", m.Name)
	}
	infos, err := media.CheckAll(images)
	if err != nil {
		return nil, BadParam(field, "%s: %v", field, err)
	}
	audioRows := 0
	for i, info := range infos {
		if audio := media.IsAudioFormat(info.Format); audio && !m.Hears() {
			return nil, BadParam(field, "%s: file %d is audio and model %s does not take it: %s", field, i, m.Name, m.AudioRefusal())
		} else if !audio && !m.Sees() {
			return nil, BadParam(field, "%s: file %d is an image and model %s's projector has no vision encoder", field, i, m.Name)
		} else if audio {
			audioRows += audioWindows(info.Duration) * m.Media.AudioWindowRows()
		}
	}
	if audioRows >= m.Desc.Ctx {
		// Refused before the audio is decoded: its windows alone are past
		// the context.
		e := ContextExceededError(audioRows, m.Desc.Ctx)
		e.Param, e.Msg = field, fmt.Sprintf("%s: the audio is at least %d rows, past the context of %d", field, audioRows, m.Desc.Ctx)
		return nil, e
	}
	if err := CheckPromptBytes(m.Desc, "prompt", len(text)); err != nil {
		return nil, err
	}
	mc, err := m.Media.TokenizeMedia(text, images, addBOS && m.Desc.AddBOS)
	if errors.Is(err, engine.ErrClosed) {
		return nil, ErrShutDown
	}
	var ee *engine.Error
	if errors.As(err, &ee) && (ee.Status == engine.StatusInvalid || ee.Status == engine.StatusUnsupported) {
		return nil, BadParam(field, "%s: %s", field, ee.Msg)
	}
	if err != nil {
		return nil, InternalError("tokenizing a prompt with media: %v", err)
	}
	p := &MediaPrompt{chunks: mc, refs: 1}
	for i, c := range mc.Chunks() {
		if c.Tokens != nil || c.Rows == 0 {
			p.Prompt = append(p.Prompt, c.Tokens...)
			continue
		}
		digest, ok := chunkKey(c)
		if !ok {
			p.Close()
			return nil, InternalError("a media chunk without a SHA-256 id (%q)", c.Digest)
		}
		p.Spans = append(p.Spans, sched.MediaSpan{At: len(p.Prompt), N: c.Rows, Digest: digest,
			Encode: func() ([]float32, error) { return mc.Encode(i) }})
		p.Prompt = append(p.Prompt, make([]engine.Token, c.Rows)...)
		p.Rows += c.Rows
	}
	if n := len(p.Spans); n > 0 && p.Spans[n-1].At+p.Spans[n-1].N >= len(p.Prompt) {
		p.Close()
		return nil, BadParam(field, "%s: the prompt ends with an image or audio; text must follow it", field)
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
