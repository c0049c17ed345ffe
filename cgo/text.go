package cgo

/*
#include <stdlib.h>
#include "superfluid.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"superfluid/engine"
)

// The text functions only read the vocabulary: unlike ticks they may be
// called from any goroutine, concurrently with a running tick (llama.cpp's
// vocabulary is immutable once loaded). Each holds textMu for reading, so
// Close cannot free the vocabulary under it.

// textErrLen is the size of the buffer a failed text call explains itself in.
const textErrLen = 256

// MaxTextBytes is the longest text Tokenize accepts: more bytes than
// maxTextBytesPerPiece × context × the longest token piece cannot fit the
// context, so such a text is refused before it is tokenized.
func (e *Engine) MaxTextBytes() int { return e.maxTextBytes }

// Tokenize turns text into tokens. addSpecial adds BOS where the model wants
// it; parseSpecial turns special-token text (e.g. "<|im_start|>") into its
// token instead of spelling it out. A text longer than MaxTextBytes is
// refused with engine.ErrContext; on a closed engine it returns
// engine.ErrClosed.
func (e *Engine) Tokenize(text string, addSpecial, parseSpecial bool) ([]engine.Token, error) {
	if len(text) > e.maxTextBytes {
		return nil, &engine.Error{Status: engine.StatusContext, Op: "tokenize",
			Msg: fmt.Sprintf("a text of %d bytes exceeds the %d bytes a %d-token context can hold", len(text), e.maxTextBytes, e.desc.Ctx)}
	}
	e.textMu.RLock()
	defer e.textMu.RUnlock()
	if e.e == nil {
		return nil, errClosed
	}
	out := make([]engine.Token, len(text)/2+8)
	for {
		n, err := e.tokenizeInto(text, out, addSpecial, parseSpecial)
		if err != nil {
			return nil, err
		}
		if n >= 0 {
			return out[:n], nil
		}
		if -n <= len(out) {
			return nil, fmt.Errorf("cgo: tokenize: %d bytes of text could not be tokenized", len(text))
		}
		out = make([]engine.Token, -n)
	}
}

// tokenizeInto runs one tokenize call; textMu is held.
func (e *Engine) tokenizeInto(text string, out []engine.Token, addSpecial, parseSpecial bool) (int, error) {
	var ptr *C.char
	if len(text) > 0 {
		ptr = (*C.char)(unsafe.Pointer(unsafe.StringData(text)))
	}
	var why [textErrLen]C.char
	n := C.sf_tokenize(e.e, ptr, C.int32_t(len(text)), (*C.int32_t)(unsafe.Pointer(&out[0])),
		C.int32_t(len(out)), cbool(addSpecial), cbool(parseSpecial), &why[0], C.int32_t(len(why)))
	if n == C.SF_TEXT_FAILED {
		return 0, &engine.Error{Status: engine.StatusException, Op: "tokenize", Msg: C.GoString(&why[0])}
	}
	return int(n), nil
}

// AppendPiece appends the bytes of one token to dst. A piece may be part of
// a UTF-8 character; engine.TextStream reassembles them. It has no error:
// on a closed engine, or for a token it cannot render, dst comes back
// unchanged (the stream it feeds is failing anyway).
func (e *Engine) AppendPiece(dst []byte, tok engine.Token, special bool) []byte {
	e.textMu.RLock()
	defer e.textMu.RUnlock()
	if e.e == nil {
		return dst
	}
	var small [64]byte
	buf := small[:]
	for {
		n := C.sf_token_piece(e.e, C.int32_t(tok), (*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(len(buf)), cbool(special), nil, 0)
		switch {
		case n == C.SF_TEXT_FAILED:
			return dst
		case n >= 0:
			return append(dst, buf[:n]...)
		}
		buf = make([]byte, -int(n))
	}
}

// Detokenize renders tokens as text (special tokens spelled out when asked).
// It has no error: on a closed engine, or for tokens outside the
// vocabulary, it returns "".
func (e *Engine) Detokenize(tokens []engine.Token, special bool) string {
	if len(tokens) == 0 {
		return ""
	}
	e.textMu.RLock()
	defer e.textMu.RUnlock()
	if e.e == nil {
		return ""
	}
	buf := make([]byte, len(tokens)*8+16)
	for {
		n := C.sf_detokenize(e.e, (*C.int32_t)(unsafe.Pointer(&tokens[0])), C.int32_t(len(tokens)),
			(*C.char)(unsafe.Pointer(&buf[0])), C.int32_t(len(buf)), cbool(special), nil, 0)
		switch {
		case n == C.SF_TEXT_FAILED:
			return ""
		case n >= 0:
			return string(buf[:n])
		}
		buf = make([]byte, -int(n))
	}
}

// Message is one chat turn.
type Message struct {
	Role    string
	Content string
}

// ApplyChatTemplate renders a conversation with the model's template (or
// tmpl, when not empty) through llama.cpp's built-in template matcher.
func (e *Engine) ApplyChatTemplate(msgs []Message, addAssistant bool, tmpl string) (string, error) {
	e.textMu.RLock()
	defer e.textMu.RUnlock()
	if e.e == nil {
		return "", errClosed
	}
	n := len(msgs)
	arr := C.malloc(C.size_t(2*max(n, 1)) * C.size_t(unsafe.Sizeof(uintptr(0))))
	defer C.free(arr)
	ptrs := unsafe.Slice((**C.char)(arr), 2*max(n, 1))
	for i, m := range msgs {
		ptrs[i] = C.CString(m.Role)
		ptrs[n+i] = C.CString(m.Content)
	}
	defer func() {
		for i := 0; i < 2*n; i++ {
			C.free(unsafe.Pointer(ptrs[i]))
		}
	}()
	var ctmpl *C.char
	if tmpl != "" {
		ctmpl = C.CString(tmpl)
		defer C.free(unsafe.Pointer(ctmpl))
	}
	size := 256
	for _, m := range msgs {
		size += 2 * (len(m.Role) + len(m.Content))
	}
	var why [textErrLen]C.char
	for {
		buf := (*C.char)(C.malloc(C.size_t(size)))
		var needed C.int32_t
		rc := C.sf_chat_apply(e.e, ctmpl, &ptrs[0], &ptrs[n], C.int32_t(n), cbool(addAssistant), buf, C.int32_t(size), &needed,
			&why[0], C.int32_t(len(why)))
		if rc == C.SF_OK {
			s := C.GoStringN(buf, needed)
			C.free(unsafe.Pointer(buf))
			return s, nil
		}
		C.free(unsafe.Pointer(buf))
		if rc != C.SF_ERR_BUFFER {
			return "", &engine.Error{Status: engine.Status(rc), Op: "chat template", Msg: C.GoString(&why[0])}
		}
		size = int(needed) + 1
	}
}

func cbool(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}
