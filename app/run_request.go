package app

import (
	"context"
	"fmt"
	"io"

	"superfluid/chat"
	"superfluid/reply"
	"superfluid/task"
)

// OneRequest is `superfluid run`'s request: one prompt, one choice, with
// the sampling fields a /completion request carries (nil: absent, so the
// model's recommendation or llama-server's default applies as it would
// for /completion).
type OneRequest struct {
	Prompt string
	// Chat renders Prompt as a user message through the model's chat
	// template, as serve renders a chat request's message.
	Chat          bool
	MaxTokens     int
	Temperature   *float64
	TopK          *int
	TopP, MinP    *float64
	Seed          *int64
	RepeatPenalty *float64
	RepeatLastN   *int
	Stop          []string
}

// OneSpec checks r against m and makes its one generation, as /completion
// makes a request's: the same tokenizing, context check, sampling defaults
// and stop strings. Its errors are task's (a bad field named by its
// /completion name in Param).
func OneSpec(m *task.Model, r OneRequest) (*task.Spec, error) {
	text := r.Prompt
	if r.Chat {
		if m.Chat == nil {
			return nil, fmt.Errorf("%w; drop --chat", m.ChatRefused)
		}
		var err error
		if text, err = m.Chat.Render([]chat.Message{{Role: chat.RoleUser, Content: text}}, true); err != nil {
			return nil, err
		}
	}
	// BOS as serve adds it: Render removed the template's own leading BOS
	// text when the tokenizer adds one.
	prompt, err := task.Tokenize(m, text, true)
	if err != nil {
		return nil, err
	}
	if err := task.CheckPrompt(m.Desc, prompt); err != nil {
		return nil, err
	}
	if err := task.CheckStops("stop", r.Stop, task.MaxStops); err != nil {
		return nil, err
	}
	s, err := task.Sampling(m, task.SamplingFields{Temperature: r.Temperature, DefaultTemperature: task.LlamaTemperature,
		TopK: r.TopK, TopP: r.TopP, MinP: r.MinP, Seed: r.Seed, RepeatPenalty: r.RepeatPenalty})
	if err != nil {
		return nil, err
	}
	if s.PenaltyLastN, err = task.PenaltyWindow("repeat_last_n", r.RepeatLastN, task.LlamaRepeatLastN, m.Desc.Ctx); err != nil {
		return nil, err
	}
	// LoRA left nil: the adapters run at their --lora scales.
	return &task.Spec{Prompt: prompt, MaxTokens: r.MaxTokens, Sampling: s, Stop: r.Stop}, nil
}

// RunOne generates spec on m through the scheduler, writing text to w as
// it becomes visible (held back while it may be part of a stop string or
// of a character), and returns how the generation went.
func RunOne(ctx context.Context, m *task.Model, spec *task.Spec, w io.Writer) (task.Turn, error) {
	sink := task.SinkFuncs{OnDelta: func(_ int, _ []reply.Event, d *task.Delta) error {
		if len(d.Text) == 0 {
			return nil
		}
		_, err := w.Write(d.Text)
		return err
	}}
	// Its text streams to w as it comes: the scheduler treats it as watched.
	turns, err := task.Run(task.Streaming(ctx), m, &task.Request{Choices: []*task.Spec{spec}}, sink)
	if len(turns) == 0 {
		return task.Turn{}, err
	}
	return turns[0], err
}
