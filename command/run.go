package command

import (
	"errors"
	"fmt"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"superfluid/app"
	"superfluid/task"
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
			&cli.Float64Flag{Name: "temperature", Aliases: []string{"temp"}, Value: 0, Usage: "sampling temperature; 0 (or below) is greedy"},
			&cli.IntFlag{Name: "top-k", Usage: "top-k when sampling (0: off)", DefaultText: "the model's recommendation, else 40"},
			&cli.Float64Flag{Name: "top-p", Usage: "top-p when sampling (1: off)", DefaultText: "the model's recommendation, else 0.95"},
			&cli.Float64Flag{Name: "min-p", Usage: "min-p when sampling (0: off)", DefaultText: "the model's recommendation, else 0.05"},
			&cli.Float64Flag{Name: "repeat-penalty", Value: 1, Usage: "penalty on tokens repeated from the last --repeat-last-n (1: off)"},
			&cli.IntFlag{Name: "repeat-last-n", Value: task.LlamaRepeatLastN, Usage: "tokens the repeat penalty looks back over (-1: the context)"},
			&cli.Uint64Flag{Name: "seed", Value: 0, Usage: "sampling seed"},
			&cli.GenericFlag{Name: "stop", Aliases: []string{"r", "reverse-prompt"}, Value: &stopTexts{}, Usage: "end the generation at this text, which is not printed (repeatable; taken whole, spaces and commas included)"},
			&cli.BoolFlag{Name: "chat", Usage: "wrap the prompt as a user message in the model's chat template"},
			chatTemplateFileFlag(),
			&cli.IntFlag{Name: "ctx", Value: 4096, Usage: "context size in tokens"},
			&cli.IntFlag{Name: "threads", Value: runtime.NumCPU(), Usage: "CPU threads", EnvVars: []string{"SUPERFLUID_THREADS"}},
			&cli.IntFlag{Name: "batch", Value: 512, Usage: "prompt tokens per step"},
		}, append(append(cacheTypeFlags(), loraFlags()...), mmprojFlag())...),
		Action: runAction,
	}
}

// runAction loads the model as serve does (app.LoadModel) and runs the
// prompt through the request core as a /completion request of the same
// fields would run.
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
	lora, err := loraFiles(c)
	if err != nil {
		return err
	}
	m, closeModel, err := app.LoadModel(app.Options{ModelPath: modelPath, LoRA: lora, MMProj: c.String("mmproj"), Lanes: 1, Ctx: c.Int("ctx"), Batch: c.Int("batch"), Threads: c.Int("threads"),
		CacheTypeK: typeK, CacheTypeV: typeV, ChatTemplateFile: c.String("chat-template-file")})
	if err != nil {
		return err
	}
	defer closeModel()
	spec, err := app.OneSpec(m, oneRequest(c))
	if err != nil {
		return runError(err)
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var t task.Turn
	if spec.MaxTokens > 0 { // 0 tokens: nothing to generate (MaxTokens 0 is unbounded to the core)
		if t, err = app.RunOne(ctx, m, spec, c.App.Writer); err != nil {
			return runError(err)
		}
	}
	fmt.Fprintf(c.App.Writer, "\n")
	r, finish := t.Result, t.Result.Finish.String()
	if t.StopWord != "" {
		finish = fmt.Sprintf("stop %q", t.StopWord)
	}
	fmt.Fprintf(c.App.ErrWriter, "prompt: %d tokens in %s (%.1f tok/s); generation: %d tokens in %s (%.1f tok/s); finish: %s\n",
		len(spec.Prompt), r.Prefill.Round(time.Millisecond), rate(len(spec.Prompt), r.Prefill),
		t.Completed, r.Decode.Round(time.Millisecond), rate(t.Completed, r.Decode), finish)
	return nil
}

// oneRequest is the request the flags make; a sampling flag left unset is
// absent, as a field left out of a /completion request is.
func oneRequest(c *cli.Context) app.OneRequest {
	r := app.OneRequest{Prompt: c.String("prompt"), Chat: c.Bool("chat"), MaxTokens: c.Int("max-tokens"), Stop: *c.Generic("stop").(*stopTexts)}
	temp := max(c.Float64("temperature"), 0) // below 0 is greedy, as in llama.cpp
	seed := int64(c.Uint64("seed"))          // the same 64 bits back in the sampler
	penalty, window := c.Float64("repeat-penalty"), c.Int("repeat-last-n")
	r.Temperature, r.Seed, r.RepeatPenalty, r.RepeatLastN = &temp, &seed, &penalty, &window
	if c.IsSet("top-k") {
		k := c.Int("top-k")
		r.TopK = &k
	}
	for name, dst := range map[string]**float64{"top-p": &r.TopP, "min-p": &r.MinP} {
		if c.IsSet(name) {
			v := c.Float64(name)
			*dst = &v
		}
	}
	return r
}

// runError words a core error for the command line: a bad field by its
// flag, a prompt too long with the flag that makes room.
func runError(err error) error {
	if e, ok := task.AsError(err); ok {
		switch {
		case e.Kind == task.ContextExceeded:
			return fmt.Errorf("run: %w (raise --ctx)", err)
		case e.Param != "":
			return fmt.Errorf("run: --%s: %w", strings.ReplaceAll(e.Param, "_", "-"), err)
		}
	}
	return fmt.Errorf("run: %w", err)
}

// rate is n tokens per second of d.
func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// stopTexts are --stop's values, each taken whole: urfave's string slice
// flag would trim a stop string's spaces and newlines and split it at its
// commas.
type stopTexts []string

func (s *stopTexts) Set(v string) error {
	*s = append(*s, v)
	return nil
}

func (s *stopTexts) String() string {
	if s == nil {
		return ""
	}
	return strings.Join(*s, " ")
}
