package transcribe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"strings"

	"superfluid/http/wire"
)

// The multipart form of a transcription request, read from the body the
// transport has already bounded (the upload limit), part by part, with
// bounds of its own before anything is kept: the parts' number, each
// field's size, the file's size. Every refusal is a 400 naming the field.

// Limits on the form.
const (
	// maxParts bounds the parts of one form (OpenAI's fields number a
	// dozen; repeated ones, such as include[], a few more).
	maxParts = 32
	// maxFieldBytes bounds a field other than the file (the prompt is
	// the longest a client sends).
	maxFieldBytes = 64 << 10
	// MaxFileBytes bounds the audio file, as OpenAI's API does (25 MB);
	// the server's upload limit (--max-body) may be lower.
	MaxFileBytes = 25 << 20
)

// Response formats.
const (
	formatJSON        = "json"
	formatText        = "text"
	formatVerboseJSON = "verbose_json"
)

// form is a transcription request as OpenAI's clients send it.
type form struct {
	File           []byte
	FileName       string
	Model          string
	Prompt         string
	Language       string
	ResponseFormat string
	Temperature    *float64
	MaxTokens      *int
	Stream         bool
}

// unhonoured are OpenAI's transcription fields this server does not honour,
// refused by name with why.
var unhonoured = map[string]string{
	"timestamp_granularities":    "word and segment timestamps are not produced (the model writes text, not times)",
	"timestamp_granularities[]":  "word and segment timestamps are not produced (the model writes text, not times)",
	"chunking_strategy":          "the audio is cut into mtmd's 30-second windows; no other chunking is offered",
	"include":                    "log probabilities are not returned by this endpoint",
	"include[]":                  "log probabilities are not returned by this endpoint",
	"known_speaker_names":        "speakers are not diarized",
	"known_speaker_names[]":      "speakers are not diarized",
	"known_speaker_references":   "speakers are not diarized",
	"known_speaker_references[]": "speakers are not diarized",
}

// boundary is the body's multipart boundary, from its Content-Type.
func boundary(contentType string) (string, error) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" {
		return "", wire.BadRequest("a transcription request is multipart/form-data with a file part (Content-Type %q)", contentType)
	}
	b := params["boundary"]
	if b == "" || len(b) > 70 {
		return "", wire.BadRequest("the multipart/form-data Content-Type has no valid boundary")
	}
	return b, nil
}

// part is one part of the form as sent.
type part struct {
	name, fileName string
	data           []byte
}

// readForm reads the form from body: its parts first, bounded, then
// their meaning.
func readForm(contentType string, body []byte) (*form, error) {
	parts, err := readParts(contentType, body)
	if err != nil {
		return nil, err
	}
	f := &form{ResponseFormat: formatJSON}
	seen := map[string]bool{}
	for _, p := range parts {
		if why, ok := unhonoured[p.name]; ok {
			return nil, wire.NotSupported(p.name, why)
		}
		if seen[p.name] {
			return nil, wire.BadParam(p.name, "%s is sent twice", p.name)
		}
		seen[p.name] = true
		if p.name == "file" {
			f.File, f.FileName = p.data, p.fileName
			continue
		}
		if err := f.set(p.name, string(p.data)); err != nil {
			return nil, err
		}
	}
	if len(f.File) == 0 {
		return nil, wire.BadParam("file", "file is required: the audio to transcribe, as a file part")
	}
	if f.Stream && f.ResponseFormat == formatVerboseJSON {
		return nil, wire.BadParam("stream", "stream is answered in json or text format, not verbose_json")
	}
	return f, nil
}

// readParts reads at most maxParts named parts, the file of at most
// MaxFileBytes and every other field of at most maxFieldBytes.
func readParts(contentType string, body []byte) ([]part, error) {
	bound, err := boundary(contentType)
	if err != nil {
		return nil, err
	}
	r := multipart.NewReader(bytes.NewReader(body), bound)
	var parts []part
	for {
		p, err := r.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, wire.BadRequest("the multipart body does not parse: %v", err)
		}
		if len(parts) == maxParts {
			return nil, wire.BadRequest("the form has more than %d parts", maxParts)
		}
		name := p.FormName()
		if name == "" {
			return nil, wire.BadRequest("part %d of the form has no name (Content-Disposition: form-data; name=...)", len(parts))
		}
		limit := maxFieldBytes
		if name == "file" {
			limit = MaxFileBytes
		}
		data, err := readPart(p, limit, name)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part{name: name, fileName: p.FileName(), data: data})
	}
	if len(parts) == 0 {
		return nil, wire.BadRequest("the multipart body holds no form parts (does its boundary match the Content-Type's?)")
	}
	return parts, nil
}

// readPart reads a part of at most limit bytes.
func readPart(p *multipart.Part, limit int, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(p, int64(limit)+1))
	if err != nil {
		return nil, wire.BadParam(name, "%s: the multipart body does not parse: %v", name, err)
	}
	if len(b) > limit {
		return nil, wire.BadParam(name, "%s is larger than %d bytes", name, limit)
	}
	return b, nil
}

// set reads one field other than the file. Form values are strings; the
// numbers and the flag are parsed here, as llama-server does.
func (f *form) set(name, v string) error {
	switch name {
	case "model":
		f.Model = v
	case "prompt":
		f.Prompt = v
	case "language":
		if len(v) > 16 || strings.IndexFunc(v, func(r rune) bool { return !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }) >= 0 {
			return wire.BadParam(name, "language must be a language code such as \"en\" (ISO-639-1)")
		}
		f.Language = v
	case "response_format":
		switch v {
		case formatJSON, formatText, formatVerboseJSON:
			f.ResponseFormat = v
		case "srt", "vtt", "diarized_json":
			return wire.NotSupported(name, fmt.Sprintf("%q needs timestamps or speakers, which are not produced (json, text or verbose_json)", v))
		default:
			return wire.BadParam(name, "response_format must be json, text or verbose_json")
		}
	case "temperature":
		t, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return wire.BadParam(name, "temperature must be a number")
		}
		f.Temperature = &t
	case "max_tokens":
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return wire.BadParam(name, "max_tokens must be an integer")
		}
		f.MaxTokens = &n
	case "stream":
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true", "1":
			f.Stream = true
		case "false", "0", "":
		default:
			return wire.BadParam(name, "stream must be true or false")
		}
	default:
		return wire.BadParam(name, "%s is not a transcription field", quoteName(name))
	}
	return nil
}

// quoteName quotes a client's field name, shortened.
func quoteName(name string) string {
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	return strconv.Quote(name)
}

// modelOf is the form's "model" field, read before the handler runs (the
// route's wire.Route.ModelOf): "" when the body is no form or names none,
// which the handler then refuses or answers with the default model.
func modelOf(contentType string, body []byte) string {
	bound, err := boundary(contentType)
	if err != nil {
		return ""
	}
	r := multipart.NewReader(bytes.NewReader(body), bound)
	for n := 0; n < maxParts; n++ {
		p, err := r.NextPart()
		if err != nil {
			return ""
		}
		if p.FormName() == "model" {
			b, err := io.ReadAll(io.LimitReader(p, 1024))
			if err != nil {
				return ""
			}
			return string(b)
		}
	}
	return ""
}
