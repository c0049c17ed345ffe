package transcribe

import (
	"bytes"
	"errors"
	"mime/multipart"
	"strings"
	"testing"

	"superfluid/http/wire"
	"superfluid/media/mediatest"
)

// formBody is a multipart body of fields (name, value pairs) and, when
// file is not nil, a file part; it returns the body and its Content-Type.
func formBody(t *testing.T, file []byte, fields ...string) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if file != nil {
		fw, err := w.CreateFormFile("file", "a.wav")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		w.WriteField(fields[i], fields[i+1])
	}
	w.Close()
	return b.Bytes(), w.FormDataContentType()
}

// A form reads into its fields, strings parsed as llama-server parses
// them; the model is found before the handler; every hostile or
// unhonoured shape is a 400 naming its field (or the body when no field is
// to blame).
func TestReadForm(t *testing.T) {
	wav := mediatest.SineWAV(0.5, 440, 16000)
	body, ct := formBody(t, wav, "model", "tiny", "prompt", "words", "language", "en", "temperature", "0.2",
		"response_format", "verbose_json", "max_tokens", "9")
	f, err := readForm(ct, body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f.File, wav) || f.FileName != "a.wav" || f.Model != "tiny" || f.Prompt != "words" || f.Language != "en" ||
		*f.Temperature != 0.2 || f.ResponseFormat != formatVerboseJSON || *f.MaxTokens != 9 || f.Stream {
		t.Fatalf("form %+v", f)
	}
	if got := modelOf(ct, body); got != "tiny" {
		t.Errorf("modelOf %q", got)
	}
	if got := modelOf("application/json", []byte(`{"model":"x"}`)); got != "" {
		t.Errorf("modelOf a JSON body %q", got)
	}

	manyParts := []string{}
	for i := range maxParts + 1 {
		manyParts = append(manyParts, "prompt"+strings.Repeat("x", i), "v")
	}
	cases := []struct {
		name        string
		contentType string
		body        []byte
		param, want string
	}{
		{name: "json body", contentType: "application/json", body: []byte(`{"file":"x"}`), want: "multipart/form-data"},
		{name: "no boundary", contentType: "multipart/form-data", body: body, want: "boundary"},
		{name: "wrong boundary", contentType: "multipart/form-data; boundary=nothere", body: body, want: "no form parts"},
		{name: "garbage", contentType: ct, body: []byte("\x00\x01 not a form at all"), want: "no form parts"},
		{name: "cut short", contentType: ct, body: body[:len(body)/2], param: "file", want: "does not parse"},
		{name: "no file", param: "file", want: "required"},
		{name: "srt", param: "response_format", want: "not supported"},
		{name: "granularities", param: "timestamp_granularities[]", want: "not supported"},
		{name: "unknown field", param: "voice", want: "not a transcription field"},
		{name: "twice", param: "prompt", want: "twice"},
		{name: "bad temperature", param: "temperature", want: "number"},
		{name: "bad language", param: "language", want: "language code"},
		{name: "bad stream", param: "stream", want: "true or false"},
		{name: "stream verbose", param: "stream", want: "verbose_json"},
		{name: "huge field", param: "prompt", want: "larger than"},
		{name: "many parts", want: "parts"},
	}
	fieldsOf := map[string][]string{
		"no file": {"model", "tiny"}, "srt": {"response_format", "srt"}, "granularities": {"timestamp_granularities[]", "word"},
		"unknown field": {"voice", "alloy"}, "twice": {"prompt", "a", "prompt", "b"}, "bad temperature": {"temperature", "hot"},
		"bad language": {"language", "en<script>"}, "bad stream": {"stream", "maybe"},
		"stream verbose": {"stream", "true", "response_format", "verbose_json"},
		"huge field":     {"prompt", strings.Repeat("a", maxFieldBytes+1)}, "many parts": manyParts,
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, typ := c.body, c.contentType
			if b == nil {
				file := wav
				if c.name == "no file" {
					file = nil
				}
				b, typ = formBody(t, file, fieldsOf[c.name]...)
			}
			_, err := readForm(typ, b)
			var we *wire.Error
			if !errors.As(err, &we) || we.Status != 400 || we.Param != c.param || !strings.Contains(we.Msg, c.want) {
				t.Fatalf("readForm: %v (param %q); want a 400 on %q saying %q", err, paramOf(err), c.param, c.want)
			}
			if refusedByName := c.name == "srt" || c.name == "granularities"; refusedByName != (we.Code == "unsupported_parameter") {
				t.Errorf("code %q: an unhonoured field is unsupported_parameter, nothing else", we.Code)
			}
		})
	}
}

func paramOf(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Param
	}
	return ""
}

// readForm never panics on any body.
func FuzzReadForm(f *testing.F) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	w.SetBoundary("XyZ")
	w.WriteField("model", "m")
	fw, _ := w.CreateFormFile("file", "a.wav")
	fw.Write(mediatest.SineWAV(0.01, 440, 8000))
	w.Close()
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, body []byte) {
		form, err := readForm("multipart/form-data; boundary=XyZ", body)
		if err == nil && len(form.File) == 0 {
			t.Fatal("a form without a file accepted")
		}
		modelOf("multipart/form-data; boundary=XyZ", body)
	})
}
