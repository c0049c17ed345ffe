package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"superfluid/cgo"
	"superfluid/chat"
	"superfluid/engine"
)

// `superfluid run`'s one generation: the prompt rendered as serve renders a
// chat message, then one lane ticked through prefill and decode on an
// engine of its own, with no scheduler or cache. The request core is to
// replace it (issue 24), so it is kept as it was in the command.

// RenderPrompt tokenizes the prompt; with chat it is first rendered as a
// user message through the chat package, exactly as serve renders a chat
// request (the same template loading, system fold and BOS handling).
func RenderPrompt(modelPath, templateFile string, e *cgo.Engine, text string, asChat bool) ([]engine.Token, error) {
	addSpecial := true
	if asChat {
		tmpl, refused, err := LoadChatTemplate(modelPath, templateFile, e.Descriptor(), e)
		if err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
		if tmpl == nil {
			return nil, fmt.Errorf("run: %w; drop --chat", refused)
		}
		text, err = tmpl.Render([]chat.Message{{Role: chat.RoleUser, Content: text}}, true)
		if err != nil {
			return nil, fmt.Errorf("run: %w", err)
		}
		// BOS as serve adds it: Render removed the template's own leading
		// BOS text when the tokenizer adds one.
		addSpecial = e.Descriptor().AddBOS
	}
	toks, err := e.Tokenize(text, addSpecial, true)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, errors.New("run: the prompt is empty")
	}
	if n := e.Descriptor().Ctx; len(toks) > n {
		return nil, fmt.Errorf("run: the prompt is %d tokens, past the context of %d (raise --ctx)", len(toks), n)
	}
	return toks, nil
}

// RunStats are what `superfluid run` reports of its one generation.
type RunStats struct {
	PromptTokens, Generated int
	Prefill, Decode         time.Duration
	Finish                  engine.Finish
}

// PrefillRate is prompt tokens per second of prefill.
func (st RunStats) PrefillRate() float64 { return rate(st.PromptTokens, st.Prefill) }

// DecodeRate is generated tokens per second of decode.
func (st RunStats) DecodeRate() float64 { return rate(st.Generated, st.Decode) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// GenerateOne runs a single lane through prefill and decode ticks, writing
// text as tokens arrive.
func GenerateOne(ctx context.Context, e *cgo.Engine, prompt []engine.Token, maxTokens int, s engine.Sampling, w *bufio.Writer) (RunStats, error) {
	st := RunStats{PromptTokens: len(prompt)}
	if maxTokens == 0 {
		return st, nil
	}
	const lane, seq = 1, 0
	batch := e.Descriptor().Batch
	var p engine.Plan
	p.AddAdmit(engine.Admit{Lane: lane, Seq: seq, MaxTokens: uint32(maxTokens), Sampling: s}, prompt, nil)
	var text engine.TextStream
	var piece, buf []byte
	desc := e.Descriptor()
	for done := 0; ; {
		if ctx.Err() != nil {
			return st, fmt.Errorf("run: %w", ctx.Err())
		}
		if done < len(prompt) {
			n := min(batch, len(prompt)-done)
			p.Prefills = append(p.Prefills, engine.Prefill{Lane: lane, Offset: uint32(done), Count: uint32(n)})
			done += n
		} else {
			p.Decodes = append(p.Decodes, engine.Decode{Lane: lane})
		}
		ev, err := e.Tick(&p)
		if err != nil {
			return st, err
		}
		p.Reset()
		if ev.Timings.PrefillTokens > 0 {
			st.Prefill += time.Duration(ev.Timings.StepNS)
		} else {
			st.Decode += time.Duration(ev.Timings.StepNS)
		}
		for _, te := range ev.Tokens {
			st.Generated++
			if !desc.IsEOG(te.Token) {
				piece = e.AppendPiece(piece[:0], te.Token, false)
				buf = text.Push(buf[:0], piece)
				if err := writeFlush(w, buf); err != nil {
					return st, err
				}
			}
			if te.Finish != engine.FinishNone {
				st.Finish = te.Finish
				return st, writeFlush(w, text.Flush(buf[:0]))
			}
		}
	}
}

func writeFlush(w *bufio.Writer, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("run: writing output: %w", err)
	}
	if err := w.Flush(); err != nil && !errors.Is(err, io.ErrShortWrite) {
		return fmt.Errorf("run: writing output: %w", err)
	}
	return nil
}
