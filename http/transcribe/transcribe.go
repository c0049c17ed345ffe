// Package transcribe is OpenAI's audio transcription API on the route
// seam: POST /v1/audio/transcriptions and /audio/transcriptions (as
// llama-server mounts them), a multipart/form-data upload of one audio file
// (WAV, MP3, FLAC) with model, prompt, language, temperature, max_tokens,
// response_format (json, text, verbose_json) and stream (SSE
// transcript.text.delta and transcript.text.done events). As llama-server
// does, a transcription is a chat turn of one user message — the prompt
// ("Transcribe audio to text" unless sent), the language when sent, and
// the audio's marker — planned and run through the request core (task), so
// it queues, preempts, caches and is cancelled like every request; the
// audio is checked (package media) before anything decodes it.
package transcribe

import (
	"context"
	"math"

	"github.com/valyala/fasthttp"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/media"
	"superfluid/reply"
	"superfluid/task"
)

// defaultPrompt is the user text before the audio when the request sends
// no prompt (llama.cpp's preset for speech recognition).
const defaultPrompt = "Transcribe audio to text"

// Routes are the transcription routes on h.
func Routes(h wire.Host) []wire.Route {
	a := &api{host: h}
	var routes []wire.Route
	for _, path := range []string{"/v1/audio/transcriptions", "/audio/transcriptions"} {
		routes = append(routes, wire.Route{Method: "POST", Path: path, API: wire.OpenAI, Handle: a.transcribe,
			Body: wire.BodyUpload, Generates: true, ModelOf: func(ctx *fasthttp.RequestCtx) string {
				return modelOf(string(ctx.Request.Header.ContentType()), ctx.PostBody())
			}})
	}
	return routes
}

type api struct{ host wire.Host }

// job is a transcription planned: the core's request and what the answer
// reports beside the text.
type job struct {
	g        *task.Request
	form     *form
	duration float64 // the audio's length in seconds, from its header
}

func (a *api) transcribe(ctx *fasthttp.RequestCtx, m *task.Model) error {
	f, err := readForm(string(ctx.Request.Header.ContentType()), ctx.PostBody())
	if err != nil {
		return err
	}
	j, err := plan(ctx, a.host, m, f)
	if err != nil {
		return err
	}
	// Submitted by the time the answer returns: the job holds its own
	// reference to the audio.
	defer j.g.Media.Close()
	if f.Stream {
		return a.stream(ctx, m, j)
	}
	rctx, done := a.host.RequestContext(ctx)
	defer done()
	out, err := j.run(rctx, m)
	if err != nil {
		return err
	}
	return j.answer(ctx, out)
}

// plan checks the audio and reads the form into the core's request.
func plan(ctx *fasthttp.RequestCtx, h wire.Host, m *task.Model, f *form) (*job, error) {
	if why := m.AudioRefusal(); why != "" {
		return nil, wire.BadParam("file", "model %s does not take audio: %s", m.Name, why)
	}
	if !media.IsAudio(f.File) {
		return nil, wire.BadParam("file", "file is not WAV, MP3 or FLAC audio (unknown magic bytes)")
	}
	info, err := media.CheckAudio(f.File)
	if err != nil {
		return nil, wire.BadParam("file", "file: %v", err)
	}
	text := f.Prompt
	if text == "" {
		text = defaultPrompt
	}
	if f.Language != "" {
		text += " (language: " + f.Language + ")"
	}
	text += task.MediaMarker
	turn := task.Chat{Messages: []chat.Message{{Role: chat.RoleUser, Content: text}}, Images: [][]byte{f.File}, ImageField: "file"}
	cp, err := task.PlanChat(m, &turn)
	if err != nil {
		return nil, wire.Convert(err)
	}
	g, err := request(ctx, h, m, f, &turn)
	if err != nil {
		cp.Close()
		return nil, err
	}
	cp.Apply(&g.Spec)
	return &job{g: g, form: f, duration: info.Duration.Seconds()}, nil
}

// request is the core's request for the form's generation fields.
func request(ctx *fasthttp.RequestCtx, h wire.Host, m *task.Model, f *form, turn *task.Chat) (*task.Request, error) {
	maxTok, err := task.MaxTokens("max_tokens", f.MaxTokens, m.Desc.Ctx)
	if err != nil {
		return nil, err
	}
	// OpenAI's default temperature for transcription is 0.
	smp, err := task.Sampling(m, task.SamplingFields{Temperature: f.Temperature, DefaultTemperature: 0})
	if err != nil {
		return nil, err
	}
	class, err := wire.TurnClass(ctx, h, turn)
	if err != nil {
		return nil, err
	}
	g := &task.Request{Spec: task.Spec{Class: class, MaxTokens: maxTok, Sampling: smp}, N: 1}
	if f.ResponseFormat == formatVerboseJSON {
		g.Logprobs = 1 // the segment's tokens and average log probability
	}
	return g, nil
}

// outcome is a finished transcription.
type outcome struct {
	turn    wire.TurnOut
	tokens  []int
	logprob float64 // the sampled tokens' log probabilities, summed
}

// run runs the job to its end.
func (j *job) run(ctx context.Context, m *task.Model) (*outcome, error) {
	j.g.Part = "transcription"
	jb, err := task.Start(ctx, m, j.g)
	if err != nil {
		return nil, err
	}
	out := &outcome{}
	turns, err := wire.RunJob(ctx, jb, task.SinkFuncs{OnDelta: func(_ int, _ []reply.Event, d *task.Delta) error {
		if d != nil {
			out.add(d)
		}
		return nil
	}})
	if err != nil {
		return nil, err
	}
	out.turn = wire.TurnOutOf(turns[0])
	return out, nil
}

func (o *outcome) add(d *task.Delta) {
	for _, t := range d.Tokens {
		o.tokens = append(o.tokens, int(t.ID))
		if !math.IsInf(float64(t.Logprob), 0) && !math.IsNaN(float64(t.Logprob)) {
			o.logprob += float64(t.Logprob)
		}
	}
}
