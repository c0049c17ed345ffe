package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/app"
	"superfluid/media/mediatest"
	"superfluid/synth"
)

// Issue 27: mtmd GGML_ABORTs when it counts a window's rows differently
// from the rows its encoder graph makes, which an Ultravox projector with
// its own stack factor of 8 does (187 against 188). Served as a real
// process, such a projector's audio is refused at load with a warning; an
// audio request is a 400 naming its field; the process lives on.

// audioProjStackFile writes (once) an audio-only synthetic projector
// stacking stack encoder frames a row.
func audioProjStackFile(t testing.TB, stack int) string {
	t.Helper()
	modelMu.Lock()
	defer modelMu.Unlock()
	key := fmt.Sprintf("mmproj-audio-stack%d", stack)
	if p, ok := modelMemo[key]; ok {
		return p
	}
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(modelDir, fmt.Sprintf("tiny.audio-stack%d.mmproj.gguf", stack))
	if err := synth.WriteMMProj(path, synth.MMProjOptions{Shape: s, Seed: 5, Modality: synth.ModalityAudio, AudioStack: stack}); err != nil {
		t.Fatal(err)
	}
	modelMemo[key] = path
	return path
}

// postTo posts body with contentType to the process at url+path and
// returns the status and the OpenAI error's message and param (if any).
func postTo(t *testing.T, url, path, contentType string, body []byte) (int, string, string, []byte) {
	t.Helper()
	resp, err := http.Post(url+path, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct {
			Message string `json:"message"`
			Param   string `json:"param"`
		} `json:"error"`
	}
	json.Unmarshal(out, &e)
	return resp.StatusCode, e.Error.Message, e.Error.Param, out
}

func TestAudioStackFactorMismatchRefused(t *testing.T) {
	p := startServe(t, nil, "--model", tinyModel(t), "--alias", "tiny", "--mmproj", audioProjStackFile(t, 8),
		"--port", "0", "--threads", "1", "--park-dir", "off")
	if log := p.stderr.String(); !strings.Contains(log, "its audio is refused") || !strings.Contains(log, "188") {
		t.Errorf("no load warning saying why audio is refused:\n%s", log)
	}
	wav := mediatest.SineWAV(2, 440, 16000)
	chat, _ := json.Marshal(map[string]any{"model": "tiny", "max_tokens": 4, "messages": []map[string]any{{"role": "user", "content": []map[string]any{
		{"type": "text", "text": "hear"},
		{"type": "input_audio", "input_audio": map[string]any{"data": base64.StdEncoding.EncodeToString(wav), "format": "wav"}}}}}})
	status, msg, param, out := postTo(t, p.url, "/v1/chat/completions", "application/json", chat)
	if status != 400 || param != "messages" || !strings.Contains(msg, "no audio encoder it can use") || !strings.Contains(msg, "187 rows while its graph makes 188") {
		t.Errorf("chat input_audio: %d %s, want a 400 on messages saying why", status, out)
	}
	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	fw, _ := w.CreateFormFile("file", "a.wav")
	fw.Write(wav)
	w.WriteField("model", "tiny")
	w.Close()
	status, msg, param, out = postTo(t, p.url, "/v1/audio/transcriptions", w.FormDataContentType(), form.Bytes())
	if status != 400 || param != "file" || !strings.Contains(msg, "no audio encoder it can use") {
		t.Errorf("transcription: %d %s, want a 400 on file saying why", status, out)
	}
	text, _ := json.Marshal(map[string]any{"model": "tiny", "max_tokens": 4, "messages": []map[string]any{{"role": "user", "content": "hello"}}})
	if status, _, _, out := postTo(t, p.url, "/v1/chat/completions", "application/json", text); status != 200 {
		t.Errorf("a text chat after the refusals: %d %s", status, out)
	}
	select {
	case <-p.exited:
		t.Fatalf("the server exited (%v):\n%s", p.err, p.stderr)
	default:
	}
}

// The stack the synthetic projector writes by default (10, which divides
// a window's 1,500 encoder frames) still hears: a transcription is answered
// with the window's rows counted.
func TestAudioStackFactorDividingTranscribes(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 1, MMProj: audioProjStackFile(t, synth.MMProjAudioStack)})
	status, _, body := transcribeRaw(t, st, mediatest.SineWAV(2, 440, 16000), "model", "tiny", "max_tokens", "4")
	var got struct {
		Text  string `json:"text"`
		Usage struct {
			InputTokens int `json:"input_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &got); status != 200 || err != nil || got.Usage.InputTokens < synth.MMProjAudioTokens {
		t.Errorf("transcription: %d %s, want an answer counting the window's %d rows", status, body, synth.MMProjAudioTokens)
	}
}
