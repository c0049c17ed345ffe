package command

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"superfluid/app"
	"superfluid/cgo"
	"superfluid/chat"
	"superfluid/engine"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "generate text from a prompt and stream it to stdout",
		ArgsUsage: " ",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "GGUF file or pulled model name", EnvVars: []string{"SUPERFLUID_MODEL"}},
			dataDirFlag(),
			modelsDirFlag(),
			&cli.StringFlag{Name: "prompt", Aliases: []string{"p"}, Required: true, Usage: "prompt text"},
			&cli.IntFlag{Name: "max-tokens", Aliases: []string{"n"}, Value: 128, Usage: "most tokens to generate"},
			&cli.Float64Flag{Name: "temperature", Value: 0, Usage: "sampling temperature; 0 is greedy"},
			&cli.IntFlag{Name: "top-k", Value: 40, Usage: "top-k when sampling (0: off)"},
			&cli.Float64Flag{Name: "top-p", Value: 0.95, Usage: "top-p when sampling (1: off)"},
			&cli.Uint64Flag{Name: "seed", Value: 0, Usage: "sampling seed"},
			&cli.BoolFlag{Name: "chat", Usage: "wrap the prompt as a user message in the model's chat template"},
			chatTemplateFileFlag(),
			&cli.IntFlag{Name: "ctx", Value: 4096, Usage: "context size in tokens"},
			&cli.IntFlag{Name: "threads", Value: runtime.NumCPU(), Usage: "CPU threads", EnvVars: []string{"SUPERFLUID_THREADS"}},
			&cli.IntFlag{Name: "batch", Value: 512, Usage: "prompt tokens per step"},
		}, cacheTypeFlags()...),
		Action: runAction,
	}
}

func runAction(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("run: unexpected argument %q (the prompt goes in --prompt)", c.Args().First())
	}
	if c.Int("max-tokens") < 0 || c.Int("ctx") < 0 || c.Int("batch") < 1 {
		return errors.New("run: --max-tokens and --ctx must not be negative, --batch must be positive")
	}
	if c.String("chat-template-file") != "" && !c.Bool("chat") {
		return errors.New("run: --chat-template-file renders chat prompts; add --chat")
	}
	typeK, typeV, err := cacheTypes(c, "")
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	modelPath, err := resolveModelFlag(c)
	if err != nil {
		return err
	}
	e, err := cgo.Open(cgo.Options{ModelPath: modelPath, Ctx: c.Int("ctx"), Lanes: 1, Seqs: 1, Batch: c.Int("batch"), Threads: c.Int("threads"),
		CacheTypeK: typeK, CacheTypeV: typeV})
	if err != nil {
		return err
	}
	defer e.Close()
	prompt, err := renderPrompt(modelPath, c.String("chat-template-file"), e, c.String("prompt"), c.Bool("chat"))
	if err != nil {
		return err
	}
	s := engine.Greedy()
	if t := c.Float64("temperature"); t > 0 {
		s = engine.Sampling{Temperature: float32(t), TopK: int32(c.Int("top-k")), TopP: float32(c.Float64("top-p")), RepeatPenalty: 1, Seed: c.Uint64("seed")}
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	out := bufio.NewWriter(c.App.Writer)
	st, err := generateOne(ctx, e, prompt, c.Int("max-tokens"), s, out)
	out.Flush()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "\n")
	fmt.Fprintf(c.App.ErrWriter, "prompt: %d tokens in %s (%.1f tok/s); generation: %d tokens in %s (%.1f tok/s); finish: %s\n",
		st.promptTokens, st.prefill.Round(time.Millisecond), rate(st.promptTokens, st.prefill),
		st.generated, st.decode.Round(time.Millisecond), rate(st.generated, st.decode), st.finish)
	return nil
}

// renderPrompt tokenizes the prompt; with chat it is first rendered as a
// user message through the chat package, exactly as serve renders a chat
// request (the same template loading, system fold and BOS handling).
func renderPrompt(modelPath, templateFile string, e *cgo.Engine, text string, asChat bool) ([]engine.Token, error) {
	addSpecial := true
	if asChat {
		tmpl, refused, err := app.LoadChatTemplate(modelPath, templateFile, e.Descriptor(), e)
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

type runStats struct {
	promptTokens, generated int
	prefill, decode         time.Duration
	finish                  engine.Finish
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// generateOne runs a single lane through prefill and decode ticks, writing
// text as tokens arrive.
func generateOne(ctx context.Context, e *cgo.Engine, prompt []engine.Token, maxTokens int, s engine.Sampling, w *bufio.Writer) (runStats, error) {
	st := runStats{promptTokens: len(prompt)}
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
			st.prefill += time.Duration(ev.Timings.StepNS)
		} else {
			st.decode += time.Duration(ev.Timings.StepNS)
		}
		for _, te := range ev.Tokens {
			st.generated++
			if !desc.IsEOG(te.Token) {
				piece = e.AppendPiece(piece[:0], te.Token, false)
				buf = text.Push(buf[:0], piece)
				if err := writeFlush(w, buf); err != nil {
					return st, err
				}
			}
			if te.Finish != engine.FinishNone {
				st.finish = te.Finish
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
