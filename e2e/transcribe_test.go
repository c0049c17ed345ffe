package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"superfluid/app"
	sfhttp "superfluid/http"
	"superfluid/media/mediatest"
	"superfluid/synth"
)

// Transcriptions end to end on the tiny model and the synthetic projector
// with both encoders: the route plans a chat turn with the audio, so its
// text is the model's greedy reply (random, on a random model) — what is
// held here is the shape of each answer, usage, caching and agreement
// between the formats.

// transcribeRaw posts a multipart form of fields and, when file is not
// nil, a file part; it returns the status, Content-Type and body.
func transcribeRaw(t *testing.T, st *app.Stack, file []byte, fields ...string) (int, string, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	if file != nil {
		fw, _ := w.CreateFormFile("file", "clip")
		fw.Write(file)
	}
	for i := 0; i+1 < len(fields); i += 2 {
		w.WriteField(fields[i], fields[i+1])
	}
	w.Close()
	return postMultipart(t, st, w.FormDataContentType(), b.Bytes())
}

func postMultipart(t *testing.T, st *app.Stack, contentType string, body []byte) (int, string, []byte) {
	t.Helper()
	resp, err := http.Post(st.URL()+"/v1/audio/transcriptions", contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), out
}

// transcriptionParams asks for a greedy transcription of at most 12
// tokens (max_tokens is llama-server's field, sent as an extra form field).
func transcriptionParams(file []byte, name string, format openai.AudioResponseFormat) openai.AudioTranscriptionNewParams {
	p := openai.AudioTranscriptionNewParams{
		File:           openai.File(bytes.NewReader(file), name, "application/octet-stream"),
		Model:          "tiny",
		ResponseFormat: format,
		Temperature:    openai.Float(0),
	}
	p.SetExtraFields(map[string]any{"max_tokens": "12"})
	return p
}

// A WAV and llama.cpp's test MP3, each answered in json, text and
// verbose_json (json and verbose_json through openai-go): the same greedy
// text in every format; json's usage counts the audio's rows and the
// second request for a file is cached past them; verbose_json reports the
// duration the header declares and one segment spanning it.
func TestTranscriptionFormats(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 2, MMProj: audioProjFile(t)})
	client := openaiClient(st)
	for _, c := range []struct {
		name     string
		file     []byte
		duration float64
	}{
		{"clip.wav", mediatest.SineWAV(3, 330, 16000), 3},
		{"test-2.mp3", testMP3(t), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, err := client.Audio.Transcriptions.New(context.Background(), transcriptionParams(c.file, c.name, openai.AudioResponseFormatJSON))
			if err != nil {
				t.Fatal(err)
			}
			var answer struct {
				Usage struct {
					InputTokens  int `json:"input_tokens"`
					OutputTokens int `json:"output_tokens"`
					Details      struct {
						AudioTokens  int `json:"audio_tokens"`
						CachedTokens int `json:"cached_tokens"`
					} `json:"input_token_details"`
				} `json:"usage"`
			}
			if err := json.Unmarshal([]byte(first.RawJSON()), &answer); err != nil {
				t.Fatal(err)
			}
			usage := answer.Usage
			if usage.Details.AudioTokens < synth.MMProjAudioTokens || usage.InputTokens <= usage.Details.AudioTokens || usage.OutputTokens == 0 {
				t.Errorf("usage %+v: the audio's rows (≥ %d) are not counted", usage, synth.MMProjAudioTokens)
			}
			again, err := client.Audio.Transcriptions.New(context.Background(), transcriptionParams(c.file, c.name, openai.AudioResponseFormatJSON))
			if err != nil {
				t.Fatal(err)
			}
			var againAnswer struct {
				Usage struct {
					Details struct {
						CachedTokens int `json:"cached_tokens"`
					} `json:"input_token_details"`
				} `json:"usage"`
			}
			json.Unmarshal([]byte(again.RawJSON()), &againAnswer)
			againUsage := againAnswer.Usage
			if againUsage.Details.CachedTokens < usage.Details.AudioTokens || again.Text != first.Text {
				t.Errorf("again: %d cached (want past the audio's %d rows), text %q vs %q", againUsage.Details.CachedTokens, usage.Details.AudioTokens, again.Text, first.Text)
			}
			status, ctype, body := transcribeRaw(t, st, c.file, "model", "tiny", "response_format", "text", "temperature", "0", "max_tokens", "12")
			if status != 200 || !strings.HasPrefix(ctype, "text/plain") || string(body) != first.Text {
				t.Errorf("text: %d %s %q, want %q", status, ctype, body, first.Text)
			}
			verbose, err := client.Audio.Transcriptions.New(context.Background(), transcriptionParams(c.file, c.name, openai.AudioResponseFormatVerboseJSON))
			if err != nil {
				t.Fatal(err)
			}
			if verbose.Text != first.Text || verbose.Duration <= 0 || (c.duration > 0 && verbose.Duration != c.duration) || len(verbose.Segments) != 1 {
				t.Fatalf("verbose_json: %s", verbose.RawJSON())
			}
			seg := verbose.Segments[0]
			if seg.Start != 0 || seg.End != verbose.Duration || seg.Text != first.Text || len(seg.Tokens) != usage.OutputTokens || seg.AvgLogprob > 0 {
				t.Errorf("segment %+v", seg)
			}
			t.Logf("%s: %.2f s, %d audio rows, text %q", c.name, verbose.Duration, usage.Details.AudioTokens, first.Text)
		})
	}
}

// A streamed transcription through openai-go: its deltas add up to the
// done event's text, which begins with the whole answer's (the client's
// streaming call replaces the extra form fields with its own stream=true,
// so the stream runs without the whole answer's max_tokens).
func TestTranscriptionStream(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 1, MMProj: audioProjFile(t)})
	client := openaiClient(st)
	wav := mediatest.SineWAV(2, 600, 16000)
	whole, err := client.Audio.Transcriptions.New(context.Background(), transcriptionParams(wav, "a.wav", openai.AudioResponseFormatJSON))
	if err != nil {
		t.Fatal(err)
	}
	stream := client.Audio.Transcriptions.NewStreaming(context.Background(), transcriptionParams(wav, "a.wav", openai.AudioResponseFormatJSON))
	var deltas strings.Builder
	done := ""
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "transcript.text.delta":
			deltas.WriteString(ev.Delta)
		case "transcript.text.done":
			done = ev.Text
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if done == "" || deltas.String() != done || !strings.HasPrefix(done, whole.Text) {
		t.Errorf("streamed deltas %q, done %q; whole %q", deltas.String(), done, whole.Text)
	}
}

// Hostile uploads are a 400 in OpenAI's error shape naming the field, a
// body over the upload limit is refused before it is parsed, a model
// without an audio encoder refuses audio naming file; the server serves on.
func TestTranscriptionRefusals(t *testing.T) {
	o := app.Options{Lanes: 1, MMProj: audioProjFile(t)}
	o.HTTP.MaxBody = 512 << 10
	st := startStack(t, o)
	wav := mediatest.SineWAV(1, 440, 16000)
	// A FLAC whose STREAMINFO declares an hour at 16 kHz: 42 bytes.
	long := []byte("fLaC\x00\x00\x00\x22")
	info := make([]byte, 34)
	binary.BigEndian.PutUint64(info[10:], 16000<<44|15<<36|16000*3600)
	long = append(long, info...)
	cut := append([]byte(nil), wav[:len(wav)/2]...)
	var manyParts []string
	for i := range 40 {
		manyParts = append(manyParts, fmt.Sprintf("x%d", i), "y")
	}
	for _, c := range []struct {
		name   string
		file   []byte
		fields []string
		param  string
		want   string
	}{
		{"no file", nil, []string{"model", "tiny"}, "file", "required"},
		{"not audio", []byte("just some text that is no audio at all"), nil, "file", "not WAV, MP3 or FLAC"},
		{"truncated", cut, nil, "file", "truncated"},
		{"hours long", long, nil, "file", "at most 30m0s"},
		{"srt", wav, []string{"response_format", "srt"}, "response_format", "not supported"},
		{"timestamps", wav, []string{"timestamp_granularities[]", "word"}, "timestamp_granularities[]", "not supported"},
		{"temperature", wav, []string{"temperature", "-3"}, "temperature", "temperature"},
		{"unknown field", wav, []string{"voice", "alloy"}, "voice", "not a transcription field"},
		{"huge field", wav, []string{"prompt", strings.Repeat("p", 65<<10)}, "prompt", "larger than"},
		{"many parts", wav, manyParts, "", "parts"},
	} {
		status, _, body := transcribeRaw(t, st, c.file, c.fields...)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Param   string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); status != 400 || err != nil || e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s: %d %s, want a 400 on %q saying %q", c.name, status, body, c.param, c.want)
		}
	}
	if status, _, body := postMultipart(t, st, "multipart/form-data; boundary=nope", []byte("--other\r\n\r\nx")); status != 400 || !strings.Contains(string(body), "boundary") {
		t.Errorf("bad boundary: %d %s", status, body)
	}
	if status, _, body := postMultipart(t, st, "application/json", []byte(`{"file":"x"}`)); status != 400 || !strings.Contains(string(body), "multipart/form-data") {
		t.Errorf("a JSON body: %d %s", status, body)
	}
	expectTooLarge(t, st, sfhttp.RouteInfo{Method: "POST", Path: "/v1/audio/transcriptions", API: "openai"})
	client := openaiClient(st)
	if _, err := client.Audio.Transcriptions.New(context.Background(), transcriptionParams(wav, "a.wav", openai.AudioResponseFormatJSON)); err != nil {
		t.Errorf("after the refusals: %v", err)
	}
	seeing := startStack(t, app.Options{Lanes: 1, MMProj: mmprojFile(t)})
	seeingClient := openaiClient(seeing)
	_, err := seeingClient.Audio.Transcriptions.New(context.Background(), transcriptionParams(wav, "a.wav", openai.AudioResponseFormatJSON))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "file" || !strings.Contains(apiErr.Message, "audio encoder") {
		t.Errorf("a model without an audio encoder: %v", err)
	}
}
