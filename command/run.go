package command

import (
	"bufio"
	"errors"
	"fmt"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"superfluid/app"
	"superfluid/cgo"
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
	prompt, err := app.RenderPrompt(modelPath, c.String("chat-template-file"), e, c.String("prompt"), c.Bool("chat"))
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
	st, err := app.GenerateOne(ctx, e, prompt, c.Int("max-tokens"), s, out)
	out.Flush()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "\n")
	fmt.Fprintf(c.App.ErrWriter, "prompt: %d tokens in %s (%.1f tok/s); generation: %d tokens in %s (%.1f tok/s); finish: %s\n",
		st.PromptTokens, st.Prefill.Round(time.Millisecond), st.PrefillRate(),
		st.Generated, st.Decode.Round(time.Millisecond), st.DecodeRate(), st.Finish)
	return nil
}
