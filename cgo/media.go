package cgo

/*
#include <stdlib.h>
#include "superfluid.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"superfluid/engine"
)

// Media is a projector (an mmproj GGUF: a vision encoder, an audio encoder
// or both) loaded through llama.cpp's mtmd beside an engine's model: it
// tokenizes a prompt whose media markers stand for images or audio into
// chunks, and encodes a media chunk into embedding rows of the model's
// width. Tokenize may be called from any goroutine;
// Encode runs the projector's one compute context, so calls to it are
// serialised here. Close it before the engine it was opened on.
type Media struct {
	life   sync.RWMutex // read-held by Tokenize and Encode, held by Close
	encode sync.Mutex   // held by Encode
	m      *C.sf_media
	width  int
	marker string
	// vision, audio: the encoders the projector has; audioRate the sample
	// rate audio is decoded at (0 without an audio encoder).
	vision, audio bool
	audioRate     int
	windowRows    int
	// audioRefused says why the projector's audio encoder is not used
	// (audio is then false).
	audioRefused string
}

// MediaKind says what a chunk of a tokenized prompt holds.
type MediaKind int

// Chunk kinds (enum sf_media_chunk_kind).
const (
	MediaText  MediaKind = C.SF_MEDIA_TEXT
	MediaImage MediaKind = C.SF_MEDIA_IMAGE
	MediaAudio MediaKind = C.SF_MEDIA_AUDIO
)

// MediaChunk is one chunk of a tokenized prompt: text tokens, or a media
// file's Rows embedding rows taking Pos positions, identified by Digest (the
// SHA-256, hex, of the file's bytes) and Segment (which of the file's
// chunks it is: an audio file is a chunk per 30-second window, each with
// the file's digest).
type MediaChunk struct {
	Kind    MediaKind
	Tokens  []engine.Token
	Rows    int
	Pos     int
	Digest  string
	Segment int
}

// MediaPrompt is a prompt tokenized with its images; Free releases the
// images' preprocessed pixels, which Encode reads.
type MediaPrompt struct {
	p      *C.sf_media_prompt
	Chunks []MediaChunk
}

const mediaErrLen = 640

// OpenMedia loads the projector at path for e's model.
func (e *Engine) OpenMedia(path string, threads int) (*Media, error) {
	e.textMu.RLock()
	defer e.textMu.RUnlock()
	if e.e == nil {
		return nil, errClosed
	}
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var why [mediaErrLen]C.char
	var m *C.sf_media
	if rc := C.sf_media_open(e.e, cpath, C.int32_t(threads), &m, &why[0], C.int32_t(len(why))); rc != C.SF_OK {
		return nil, &engine.Error{Status: engine.Status(rc), Op: "media " + path, Msg: C.GoString(&why[0])}
	}
	mods := C.sf_media_modalities(m)
	return &Media{m: m, width: int(C.sf_media_n_embd(m)), marker: C.GoString(C.sf_media_marker(m)),
		vision: mods&C.SF_MEDIA_VISION != 0, audio: mods&C.SF_MEDIA_HEARING != 0, audioRate: int(C.sf_media_audio_rate(m)),
		windowRows: int(C.sf_media_audio_window_rows(m)), audioRefused: C.GoString(C.sf_media_audio_refused(m))}, nil
}

// Vision reports whether the projector encodes images.
func (m *Media) Vision() bool { return m.vision }

// Audio reports whether the projector encodes audio.
func (m *Media) Audio() bool { return m.audio }

// AudioRefused says why the projector's audio encoder is not used, or ""
// (it is used, or there is none): mtmd would abort encoding its windows.
// Audio then reports false and Tokenize refuses audio saying this.
func (m *Media) AudioRefused() string { return m.audioRefused }

// audioWindowRowsFor is the guard's two formulas (sf_media_audio_window_rows_for)
// for tests: the rows mtmd counts and its graph builds for a window of
// frames mel frames of projector type proj stacking stack frames; ok is
// false when proj is not a type the guard mirrors.
func audioWindowRowsFor(proj string, stack, frames int) (counted, built int, ok bool) {
	cproj := C.CString(proj)
	defer C.free(unsafe.Pointer(cproj))
	var c, b C.int32_t
	if C.sf_media_audio_window_rows_for(cproj, C.int32_t(stack), C.int32_t(frames), &c, &b) == 0 {
		return 0, 0, false
	}
	return int(c), int(b), true
}

// AudioRate is the sample rate audio is decoded at (0 without audio).
func (m *Media) AudioRate() int { return m.audioRate }

// AudioWindowRows is the rows of one 30-second audio window (0 without
// audio).
func (m *Media) AudioWindowRows() int { return m.windowRows }

// Close frees the projector.
func (m *Media) Close() {
	m.life.Lock()
	defer m.life.Unlock()
	if m.m != nil {
		C.sf_media_close(m.m)
		m.m = nil
	}
}

// Width is the floats in one embedding row (the model's input width).
func (m *Media) Width() int { return m.width }

// Marker is the text that stands for one image or audio in Tokenize's prompt.
func (m *Media) Marker() string { return m.marker }

// Tokenize decodes the media files (images or audio, told apart by their
// magic bytes) and tokenizes text, whose i-th marker stands for images[i].
// A file that does not decode, or markers that do not match the files in
// number, is an engine.StatusInvalid error; a kind of media the projector
// has no encoder for, engine.StatusUnsupported. The files' bytes are read
// during the call only.
func (m *Media) Tokenize(text string, images [][]byte, addSpecial bool) (*MediaPrompt, error) {
	m.life.RLock()
	defer m.life.RUnlock()
	if m.m == nil {
		return nil, errClosed
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	n := len(images)
	var files **C.uint8_t
	var lens *C.size_t
	var pin runtime.Pinner
	defer pin.Unpin()
	if n > 0 {
		// The pointer arrays live in C memory and point at the pinned
		// images: cgo forbids Go memory holding Go pointers.
		files = (**C.uint8_t)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(uintptr(0)))))
		defer C.free(unsafe.Pointer(files))
		lens = (*C.size_t)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.size_t(0)))))
		defer C.free(unsafe.Pointer(lens))
		fs := unsafe.Slice(files, n)
		ls := unsafe.Slice(lens, n)
		for i, img := range images {
			fs[i], ls[i] = nil, C.size_t(len(img))
			if len(img) > 0 {
				pin.Pin(&img[0])
				fs[i] = (*C.uint8_t)(unsafe.Pointer(&img[0]))
			}
		}
	}
	var why [mediaErrLen]C.char
	var cp *C.sf_media_prompt
	if rc := C.sf_media_tokenize(m.m, ctext, files, lens, C.uint32_t(n), cbool(addSpecial), &cp, &why[0], C.int32_t(len(why))); rc != C.SF_OK {
		return nil, &engine.Error{Status: engine.Status(rc), Op: "media tokenize", Msg: C.GoString(&why[0])}
	}
	p := &MediaPrompt{p: cp}
	nc := int(C.sf_media_prompt_n_chunks(cp))
	p.Chunks = make([]MediaChunk, nc)
	for i := range nc {
		var c C.sf_media_chunk
		if rc := C.sf_media_prompt_chunk(cp, C.uint32_t(i), &c, nil, 0); rc != C.SF_OK && rc != C.SF_ERR_BUFFER {
			p.Free()
			return nil, &engine.Error{Status: engine.Status(rc), Op: "media tokenize", Msg: fmt.Sprintf("chunk %d", i)}
		}
		ch := MediaChunk{Kind: MediaKind(c.kind), Rows: int(c.n_tokens), Pos: int(c.n_pos), Digest: C.GoString(&c.id[0]), Segment: int(c.segment)}
		if ch.Kind == MediaText {
			ch.Tokens = make([]engine.Token, c.n_tokens)
			ch.Rows = 0
			if len(ch.Tokens) > 0 {
				if rc := C.sf_media_prompt_chunk(cp, C.uint32_t(i), &c, (*C.int32_t)(unsafe.Pointer(&ch.Tokens[0])), C.uint32_t(len(ch.Tokens))); rc != C.SF_OK {
					p.Free()
					return nil, &engine.Error{Status: engine.Status(rc), Op: "media tokenize", Msg: fmt.Sprintf("chunk %d's tokens", i)}
				}
			}
		}
		p.Chunks[i] = ch
	}
	return p, nil
}

// Free releases the prompt's native chunks.
func (p *MediaPrompt) Free() {
	if p.p != nil {
		C.sf_media_prompt_free(p.p)
		p.p = nil
	}
}

// Encode runs the projector on media chunk i of p and returns its rows,
// Rows × Width floats, appended to dst.
func (m *Media) Encode(p *MediaPrompt, i int, dst []float32) ([]float32, error) {
	if p.p == nil || i < 0 || i >= len(p.Chunks) || p.Chunks[i].Kind == MediaText {
		return dst, &engine.Error{Status: engine.StatusInvalid, Op: "media encode", Msg: fmt.Sprintf("chunk %d is not a media chunk of a live prompt", i)}
	}
	need := p.Chunks[i].Rows * m.width
	if need == 0 {
		return dst, nil
	}
	start := len(dst)
	dst = append(dst, make([]float32, need)...)
	m.life.RLock()
	defer m.life.RUnlock()
	m.encode.Lock()
	defer m.encode.Unlock()
	if m.m == nil {
		return dst[:start], errClosed
	}
	var why [mediaErrLen]C.char
	out := dst[start:]
	if rc := C.sf_media_encode(m.m, p.p, C.uint32_t(i), (*C.float)(unsafe.Pointer(&out[0])), C.size_t(len(out)), &why[0], C.int32_t(len(why))); rc != C.SF_OK {
		return dst[:start], &engine.Error{Status: engine.Status(rc), Op: "media encode", Msg: C.GoString(&why[0])}
	}
	return dst, nil
}

var _ engine.RowPrefiller = (*Engine)(nil)

// RowWidth is the model's input embedding width.
func (e *Engine) RowWidth() int { return e.desc.Embd }

// PrefillRows prefills encoded media rows into an admitted lane's prompt
// (engine.RowPrefiller); the owner goroutine calls it.
func (e *Engine) PrefillRows(lane uint32, rows []float32) error {
	if e.e == nil {
		return errClosed
	}
	w := e.RowWidth()
	if w <= 0 || len(rows) == 0 || len(rows)%w != 0 {
		return &engine.Error{Status: engine.StatusInvalid, Op: "prefill rows", Msg: fmt.Sprintf("%d floats are not whole rows of %d", len(rows), w)}
	}
	if rc := C.sf_prefill_rows(e.e, C.uint32_t(lane), (*C.float)(unsafe.Pointer(&rows[0])), C.uint32_t(len(rows)/w), C.uint32_t(w)); rc != C.SF_OK {
		return e.err("prefill rows", rc)
	}
	return nil
}
