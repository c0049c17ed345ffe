package transcribe

import (
	"bytes"
	"compress/zlib"
	"context"
	"math"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/reply"
	"superfluid/task"
)

// The answers: OpenAI's json ({"text", "usage"}), text (the bare text),
// verbose_json (task, language, duration, text, segments) and the SSE
// events of a stream.

// usage is OpenAI's token usage of a transcription; the audio's tokens are
// its embedding rows.
type usage struct {
	Type         string       `json:"type"`
	InputTokens  int          `json:"input_tokens"`
	OutputTokens int          `json:"output_tokens"`
	TotalTokens  int          `json:"total_tokens"`
	InputDetails inputDetails `json:"input_token_details"`
}

type inputDetails struct {
	TextTokens   int `json:"text_tokens"`
	AudioTokens  int `json:"audio_tokens"`
	CachedTokens int `json:"cached_tokens"`
}

type jsonAnswer struct {
	Text  string `json:"text"`
	Usage usage  `json:"usage"`
}

// segment is one of verbose_json's segments. The model writes text with
// no times, so the answer is one segment spanning the whole audio: its
// start and end are the audio's, not the speech's; no_speech_prob is not
// estimated (0).
type segment struct {
	ID               int     `json:"id"`
	Seek             int     `json:"seek"`
	Start            float64 `json:"start"`
	End              float64 `json:"end"`
	Text             string  `json:"text"`
	Tokens           []int   `json:"tokens"`
	Temperature      float64 `json:"temperature"`
	AvgLogprob       float64 `json:"avg_logprob"`
	CompressionRatio float64 `json:"compression_ratio"`
	NoSpeechProb     float64 `json:"no_speech_prob"`
}

type verboseAnswer struct {
	Task     string    `json:"task"`
	Language string    `json:"language"`
	Duration float64   `json:"duration"`
	Text     string    `json:"text"`
	Segments []segment `json:"segments"`
	Usage    struct {
		Type    string  `json:"type"`
		Seconds float64 `json:"seconds"`
	} `json:"usage"`
}

type deltaEvent struct {
	Type  string `json:"type"`
	Delta string `json:"delta"`
}

type doneEvent struct {
	Type  string `json:"type"`
	Text  string `json:"text"`
	Usage usage  `json:"usage"`
}

func (j *job) usage(o *outcome) usage {
	rows := 0
	if j.g.Media != nil {
		rows = j.g.Media.Rows
	}
	in := len(j.g.Prompt)
	return usage{Type: "tokens", InputTokens: in, OutputTokens: o.turn.Completed, TotalTokens: in + o.turn.Completed,
		InputDetails: inputDetails{TextTokens: in - rows, AudioTokens: rows, CachedTokens: o.turn.Result.CachedTokens}}
}

// answer writes a whole transcription in the form's response format.
func (j *job) answer(ctx *fasthttp.RequestCtx, o *outcome) error {
	switch j.form.ResponseFormat {
	case formatText:
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString(o.turn.Content)
		return nil
	case formatVerboseJSON:
		return wire.WriteJSON(ctx, j.verbose(o))
	}
	return wire.WriteJSON(ctx, jsonAnswer{Text: o.turn.Content, Usage: j.usage(o)})
}

func (j *job) verbose(o *outcome) verboseAnswer {
	v := verboseAnswer{Task: "transcribe", Language: j.form.Language, Duration: j.duration, Text: o.turn.Content}
	seg := segment{Start: 0, End: j.duration, Text: o.turn.Content, Tokens: o.tokens, Temperature: float64(j.g.Sampling.Temperature),
		CompressionRatio: compressionRatio(o.turn.Content)}
	if seg.Tokens == nil {
		seg.Tokens = []int{}
	}
	if len(o.tokens) > 0 {
		seg.AvgLogprob = o.logprob / float64(len(o.tokens))
	}
	v.Segments = []segment{seg}
	v.Usage.Type, v.Usage.Seconds = "duration", math.Ceil(j.duration)
	return v
}

// compressionRatio is Whisper's repetition gauge: the text's bytes over
// their zlib-compressed bytes (0 for no text).
func compressionRatio(s string) float64 {
	if s == "" {
		return 0
	}
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return float64(len(s)) / float64(b.Len())
}

// stream submits the job, then streams its text as transcript.text.delta
// events and ends with transcript.text.done (the whole text and usage). A
// failure after the start ends the stream with an error event.
func (a *api) stream(ctx *fasthttp.RequestCtx, m *task.Model, j *job) error {
	var jb *task.Job
	return a.host.Stream(ctx, true, func(rctx context.Context) error {
		j.g.Part = "transcription"
		var err error
		jb, err = task.Start(rctx, m, j.g)
		return err
	}, func(rctx context.Context, cancel context.CancelFunc, ew *wire.EventWriter) {
		out := &outcome{}
		wire.RunJob(rctx, jb, task.SinkFuncs{
			OnDelta: func(_ int, evs []reply.Event, _ *task.Delta) error {
				for _, ev := range evs {
					if ev.Kind != reply.Content || ev.Text == "" {
						continue
					}
					if err := ew.Send("", deltaEvent{Type: "transcript.text.delta", Delta: ev.Text}); err != nil {
						return err
					}
				}
				return nil
			},
			OnEnded: func(_ int, t *task.Turn) error {
				out.turn = wire.TurnOutOf(*t)
				return ew.Send("", doneEvent{Type: "transcript.text.done", Text: out.turn.Content, Usage: j.usage(out)})
			},
			OnFailed: ew.FailAll(cancel),
		})
	})
}
