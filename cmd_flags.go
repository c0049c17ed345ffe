package main

import (
	"fmt"
	"runtime"

	"github.com/urfave/cli/v2"

	"superfluid/cgo"
)

// engineFlags are the flags of a command that loads a model to serve many
// requests (serve, batch): lanes (default given), context, threads, step
// size, KV type, flash attention, the CPU threads' polling and weight
// repacking.
func engineFlags(lanes int) []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "lanes", Value: lanes, Usage: "requests decoded at once", EnvVars: env("LANES")},
		&cli.IntFlag{Name: "ctx", Value: 16384, Usage: "context tokens, shared by every lane and the prefix cache", EnvVars: env("CTX")},
		&cli.IntFlag{Name: "threads", Value: runtime.NumCPU(), Usage: "CPU threads", EnvVars: env("THREADS")},
		&cli.IntFlag{Name: "batch", Usage: "most tokens one engine step may carry (llama.cpp's n_batch): a cap, the scheduler sizes steps by time below it (about half a second while a request could join, whole micro-batches within 2 s for a prompt alone; a chat or FIM prompt that fits runs in one step)", DefaultText: fmt.Sprint(cgo.DefaultBatch), EnvVars: env("BATCH")},
		&cli.IntFlag{Name: "ubatch", Usage: "micro-batch: llama_decode runs a step in parts of this many tokens (llama.cpp's n_ubatch); larger holds more activations in memory", DefaultText: fmt.Sprint(cgo.DefaultUBatch), EnvVars: env("UBATCH")},
		&cli.StringFlag{Name: "kv-type", Value: "f16", Usage: "KV cache type: f16, q8_0 or q4_0", EnvVars: env("KV_TYPE")},
		&cli.StringFlag{Name: "flash-attn", Value: "on", Usage: "flash attention: on, off or auto (llama.cpp decides); on keeps decode fast while the prefix cache holds many conversations", EnvVars: env("FLASH_ATTN")},
		&cli.IntFlag{Name: "poll", Value: cgo.DefaultPoll, Usage: "how long the CPU threads spin waiting for the next engine step before they sleep, 0 (at once) to 100, as llama.cpp's --poll; spinning keeps decode fast, sleeping frees the cores between steps", EnvVars: env("POLL")},
		&cli.BoolFlag{Name: "no-repack", Aliases: []string{"nr"}, Usage: "keep Q4_0/Q4_K/IQ4_NL weights in the file's layout instead of a copy repacked for the CPU's kernels (less memory, slower prefill and decode), as llama-server's --no-repack", EnvVars: env("NO_REPACK")},
	}
}

// chatTemplateFileFlag names a Jinja chat template that replaces the one
// the model file carries (serve and run --chat render through the same
// loader, app.LoadChatTemplate).
func chatTemplateFileFlag() cli.Flag {
	return &cli.StringFlag{Name: "chat-template-file", Usage: "Jinja chat template file to render chat prompts with, instead of the model's own", EnvVars: env("CHAT_TEMPLATE_FILE")}
}

// keepBillingHeaderFlag keeps the billing header Claude Code writes at the
// start of its system prompt; by default it is dropped, since its nonce
// changes every request and would leave the prefix cache nothing to reuse.
func keepBillingHeaderFlag() cli.Flag {
	return &cli.BoolFlag{Name: "keep-billing-header", Usage: "keep the x-anthropic-billing-header line Claude Code puts in its system prompt (a per-request nonce that defeats the prefix cache)", EnvVars: env("KEEP_BILLING_HEADER")}
}

// pollOption reads --poll into cgo.Options.Poll's terms (where 0 means the
// default and a negative value no polling).
func pollOption(c *cli.Context) (int, error) {
	n := c.Int("poll")
	switch {
	case n < 0 || n > 100:
		return 0, fmt.Errorf("--poll %d outside [0, 100]", n)
	case n == 0:
		return cgo.PollOff, nil
	}
	return n, nil
}
