package command

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"superfluid/bench"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "drive an OpenAI-, llama.cpp- or Ollama-compatible server with a workload and print a JSON report",
		Description: "Scenario defaults in the flags below are listed decode, fim-under-load, multi-turn, soak.\n\nScenarios:\n" +
			"  decode          --concurrency streams of long greedy generations (/v1/completions): decode tokens/s, TTFT\n" +
			"  fim-under-load  /infill requests idle, then beside --concurrency long background prompts: loaded/idle latency (target ≤ 1.5);\n" +
			"                  --background-url sends the load to another server (an editor's FIM model and a larger one as two processes)\n" +
			"  multi-turn      conversations over /v1/chat/completions: per-turn TTFT and cached tokens, warm/cold TTFT (target ≤ 0.05)\n" +
			"  soak            --concurrency clients send hostile mixed traffic on all four APIs (every class, streams, n > 1, hang-ups,\n" +
			"                  slow readers, poison values) for --duration, to a loopback URL only: no undocumented 5xx, no crash,\n" +
			"                  lanes idle afterwards, resident memory flat within 10% after warm-up (--pid)\n\n" +
			"A run in which any request failed reports the failures and exits non-zero; its target is never met.",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "url", Required: true, Usage: "the server's base URL, e.g. http://127.0.0.1:8080"},
			&cli.StringFlag{Name: "scenario", Aliases: []string{"s"}, Required: true, Usage: "decode, fim-under-load, multi-turn, diverge or soak"},
			&cli.StringFlag{Name: "api", Value: "openai", Usage: "openai (superfluid, llama-server, vLLM) or ollama (/api/generate, /api/chat)"},
			&cli.StringFlag{Name: "model", Usage: "model name to send (default: the server's first listed model)"},
			&cli.StringFlag{Name: "background-url", Usage: "fim-under-load: send the background load to this server instead (FIM and the load in two processes)", DefaultText: "--url"},
			&cli.StringFlag{Name: "background-model", Usage: "fim-under-load: model name the background load sends", DefaultText: "--model, or the background server's first listed model"},
			&cli.StringFlag{Name: "api-key", Usage: "sent as Authorization: Bearer KEY", EnvVars: env("API_KEY")},
			&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, Usage: "decode: streams at once; fim-under-load: background requests; multi-turn: conversations at once; soak: clients", DefaultText: "1, 4, 1, 32"},
			&cli.IntFlag{Name: "requests", Aliases: []string{"n"}, Usage: "decode: generations in total; fim-under-load: FIM requests per phase; multi-turn: conversations in total; soak: requests at most", DefaultText: "concurrency, 8, concurrency, 10000×concurrency"},
			&cli.IntFlag{Name: "turns", Usage: "multi-turn: turns per conversation, the first cold", DefaultText: "4"},
			&cli.IntFlag{Name: "max-tokens", Usage: "tokens each measured request generates (FIM: n_predict; soak: at most)", DefaultText: "256, 32, 64, 32"},
			&cli.IntFlag{Name: "prompt-tokens", Usage: "approximate prompt tokens: the decode prompt, each background prompt, each conversation's opening; soak: at most (4× for hang-ups mid-prefill)", DefaultText: "64, 2000, 2000, 256"},
			&cli.IntFlag{Name: "fim-prompt-tokens", Usage: "approximate tokens of a FIM request: extra context, prefix and suffix", DefaultText: "512"},
			&cli.BoolFlag{Name: "fim-stream", Value: true, Usage: "stream FIM answers to time their first token; --fim-stream=false sends exactly what editors send"},
			&cli.BoolFlag{Name: "fim-ignore-eos", Usage: "FIM requests generate all --max-tokens (ignore_eos), so two servers do the same work on a model whose FIM answers end early; editors do not send it"},
			&cli.DurationFlag{Name: "duration", Usage: "start no new request after this long (per FIM phase); running ones finish", DefaultText: "no bound; soak 10m"},
			&cli.DurationFlag{Name: "timeout", Usage: "bound on each request", DefaultText: "10m; soak 2m"},
			&cli.DurationFlag{Name: "idle-wait", Usage: "soak: how long, once the traffic stops, the lanes may take to go idle", DefaultText: "30s"},
			&cli.IntFlag{Name: "pid", Usage: "soak: the server's process id, to sample its resident memory (/proc/PID/status) and see it exit", DefaultText: "none"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "selects the prompt text"},
			&cli.Float64Flag{Name: "reference-tps", Usage: "decode: the raw engine's tokens/s for this stream count (llama-bench); the report gives the ratio (target ≥ 0.97)", DefaultText: "none"},
			&cli.StringFlag{Name: "cold-report", Usage: "multi-turn: an earlier report with the same --seed; this run's turn 1 (after a restart) is compared with its cold turn 1 (target ≤ 0.1)"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "also write the report to this file"},
		},
		Action: benchAction,
	}
}

func benchAction(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("bench: unexpected argument %q", c.Args().First())
	}
	cfg := bench.Config{
		URL: c.String("url"), Scenario: bench.Scenario(c.String("scenario")), API: bench.API(c.String("api")),
		Model: c.String("model"), APIKey: c.String("api-key"),
		BackgroundURL: c.String("background-url"), BackgroundModel: c.String("background-model"),
		Concurrency: c.Int("concurrency"), Requests: c.Int("requests"), Turns: c.Int("turns"),
		MaxTokens: c.Int("max-tokens"), PromptTokens: c.Int("prompt-tokens"), FIMPromptTokens: c.Int("fim-prompt-tokens"),
		FIMStream: c.Bool("fim-stream"), FIMIgnoreEOS: c.Bool("fim-ignore-eos"), Duration: c.Duration("duration"), Timeout: c.Duration("timeout"),
		Seed: c.Uint64("seed"), ReferenceTPS: c.Float64("reference-tps"), PID: c.Int("pid"), IdleWait: c.Duration("idle-wait"),
	}
	if path := c.String("cold-report"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("bench: --cold-report: %w", err)
		}
		cfg.ColdTTFT, err = bench.ColdTTFT(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	out, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	out = append(out, '\n')
	c.App.Writer.Write(out)
	if path := c.String("output"); path != "" {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return fmt.Errorf("bench: -o: %w", err)
		}
	}
	return rep.Verdict()
}
