package media

import (
	"encoding/base64"
	"strings"
)

// DecodeBase64 decodes a media file sent as base64 (Anthropic's base64
// source, Ollama's images, llama.cpp's multimodal_data, OpenAI's
// input_audio), standard or URL alphabet,
// padded or not, refusing before decoding one whose decoded size would pass
// maxBytes.
func DecodeBase64(s string, maxBytes int) ([]byte, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "=")
	if base64.RawStdEncoding.DecodedLen(len(s)) > maxBytes {
		return nil, refuse("the file's %d base64 characters decode past the %d-byte limit", len(s), maxBytes)
	}
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	b, err := enc.DecodeString(s)
	if err != nil {
		return nil, refuse("the file is not valid base64: %v", err)
	}
	return b, nil
}

// ParseDataURL decodes an OpenAI image_url of the form
// data:<mime>;base64,<data>. Anything else — an http(s) URL among them —
// is refused here; a remote URL is the caller's to allow or not.
func ParseDataURL(u string, maxBytes int) (mime string, data []byte, err error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return "", nil, refuse("not a data URL")
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, refuse("a data URL without a comma before its data")
	}
	mime, isBase64 := strings.CutSuffix(meta, ";base64")
	if !isBase64 {
		return "", nil, refuse("a data URL that is not base64 (;base64 expected)")
	}
	if mime != "" && !strings.HasPrefix(mime, "image/") {
		return "", nil, refuse("a data URL of type %q, not an image", mime)
	}
	data, err = DecodeBase64(payload, maxBytes)
	return mime, data, err
}
