package command

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"superfluid/app"
	"superfluid/batches"
	"superfluid/cgo"
	"superfluid/respstore"
	"superfluid/session"
)

// engineFlags are the flags of a command that loads a model to serve many
// requests (serve, batch): lanes (default given), context, threads, step
// size, KV cache types, flash attention, the CPU threads' polling and
// weight repacking.
func engineFlags(lanes int) []cli.Flag {
	return append(cacheTypeFlags(), []cli.Flag{
		&cli.IntFlag{Name: "lanes", Value: lanes, Usage: "requests decoded at once", EnvVars: env("LANES")},
		&cli.IntFlag{Name: "ctx", Value: 16384, Usage: "context tokens, shared by every lane and the prefix cache", EnvVars: env("CTX")},
		&cli.IntFlag{Name: "threads", Value: runtime.NumCPU(), Usage: "CPU threads", EnvVars: env("THREADS")},
		&cli.IntFlag{Name: "batch", Usage: "most tokens one engine step may carry (llama.cpp's n_batch): a cap, the scheduler sizes steps by time below it (about half a second while a request could join, whole micro-batches within 2 s for a prompt alone; a chat or FIM prompt that fits runs in one step)", DefaultText: fmt.Sprint(cgo.DefaultBatch), EnvVars: env("BATCH")},
		&cli.IntFlag{Name: "ubatch", Usage: "micro-batch: llama_decode runs a step in parts of this many tokens (llama.cpp's n_ubatch); larger holds more activations in memory", DefaultText: fmt.Sprint(cgo.DefaultUBatch), EnvVars: env("UBATCH")},
		&cli.StringFlag{Name: "flash-attn", Value: "on", Usage: "flash attention: on, off or auto (llama.cpp decides); on keeps decode fast while the prefix cache holds many conversations", EnvVars: env("FLASH_ATTN")},
		&cli.IntFlag{Name: "poll", Value: cgo.DefaultPoll, Usage: "how long the CPU threads spin waiting for the next engine step before they sleep, 0 (at once) to 100, as llama.cpp's --poll; spinning keeps decode fast, sleeping frees the cores between steps", EnvVars: env("POLL")},
		&cli.BoolFlag{Name: "no-repack", Aliases: []string{"nr"}, Usage: "keep Q4_0/Q4_K/IQ4_NL weights in the file's layout instead of a copy repacked for the CPU's kernels (less memory, slower prefill and decode), as llama-server's --no-repack", EnvVars: env("NO_REPACK")},
	}...)
}

// cacheTypeFlags are the K and V caches' cell types, named and
// abbreviated as llama.cpp's (-ctk, -ctv).
func cacheTypeFlags() []cli.Flag {
	types := strings.Join(cgo.CacheTypes, ", ")
	return []cli.Flag{
		&cli.StringFlag{Name: "cache-type-k", Aliases: []string{"ctk"}, Value: "f16", Usage: "KV cache type for K: " + types + " (q8_0 takes 34/64 of f16's memory per token)", EnvVars: env("CACHE_TYPE_K")},
		&cli.StringFlag{Name: "cache-type-v", Aliases: []string{"ctv"}, Value: "f16", Usage: "KV cache type for V: " + types + " (a quantized one needs flash attention)", EnvVars: env("CACHE_TYPE_V")},
	}
}

// cacheTypes reads --cache-type-k and --cache-type-v, refusing an unknown
// name (and a quantized V cache with flashAttn "off") before a model
// loads.
func cacheTypes(c *cli.Context, flashAttn string) (typeK, typeV string, err error) {
	typeK, typeV = c.String("cache-type-k"), c.String("cache-type-v")
	// The one type the cache had before both were named: set in a
	// service's environment it would otherwise be dropped without a word.
	if old, ok := os.LookupEnv("SUPERFLUID_KV_TYPE"); ok {
		return "", "", fmt.Errorf("SUPERFLUID_KV_TYPE=%q is no longer read: set SUPERFLUID_CACHE_TYPE_K and SUPERFLUID_CACHE_TYPE_V (or --cache-type-k/--cache-type-v)", old)
	}
	if err := cgo.CheckCacheTypes(typeK, typeV, flashAttn); err != nil {
		return "", "", err
	}
	return typeK, typeV, nil
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

// diskQuotaFlags bound what requests may leave on disk (app.DiskQuotas):
// sizes such as 10GiB, or off.
func diskQuotaFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "max-files-bytes", Value: sizeText(batches.DefaultMaxFilesBytes), Usage: "bytes the batch API's files (/v1/files uploads and batch outputs) may hold together under --data-dir; an upload past it is refused with a 413 (off: no bound)", EnvVars: env("MAX_FILES_BYTES")},
		&cli.StringFlag{Name: "max-stored-responses-bytes", Value: sizeText(respstore.DefaultMaxBytes), Usage: "bytes the Responses API's stored responses may hold together under --data-dir; the oldest are removed first to make room (off: no bound)", EnvVars: env("MAX_STORED_RESPONSES_BYTES")},
		&cli.StringFlag{Name: "max-stored-response-bytes", Value: sizeText(respstore.DefaultMaxRecordBytes), Usage: "bytes one stored response (which holds its whole conversation) may take; a request whose conversation is larger and asks to be stored is refused with a 400 (off: no bound)", EnvVars: env("MAX_STORED_RESPONSE_BYTES")},
		&cli.StringFlag{Name: "max-conversations-bytes", Value: sizeText(session.DefaultMaxBytes), Usage: "bytes the conversations (the Conversations API, and responses that continue one) may hold together under --data-dir; a write past it is refused with a 413 (off: no bound)", EnvVars: env("MAX_CONVERSATIONS_BYTES")},
		&cli.StringFlag{Name: "max-pull-bytes", Value: sizeText(app.DefaultMaxPullBytes), Usage: "bytes one model pulled through /api/pull may take; a larger one, or one of unknown size that grows past it, fails and its partial file is removed (off: no bound)", EnvVars: env("MAX_PULL_BYTES")},
	}
}

// sizeText writes n in the largest binary unit that divides it, as
// parseByteSize reads it: the quota flags show their packages' defaults.
func sizeText(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// diskQuotas reads diskQuotaFlags.
func diskQuotas(c *cli.Context) (app.DiskQuotas, error) {
	var q app.DiskQuotas
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"max-files-bytes", &q.FilesBytes}, {"max-stored-responses-bytes", &q.ResponsesBytes}, {"max-stored-response-bytes", &q.ResponseBytes}, {"max-conversations-bytes", &q.ConversationsBytes}, {"max-pull-bytes", &q.PullBytes}} {
		n, err := parseByteSize("--"+f.name, c.String(f.name))
		if err != nil {
			return q, err
		}
		*f.dst = n
	}
	return q, nil
}

// parseByteSize reads a size flag: a byte count with an optional unit
// (kB, MB, GB, TB, KiB, MiB, GiB, TiB), or "off" (-1: no bound).
func parseByteSize(flag, s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return -1, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"KB", 1e3}, {"B", 1}}
	mult := 1.0
	num := s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 || f*mult >= 1<<62 || f*mult < 1 {
		return 0, fmt.Errorf("%s %q: want a positive size such as 12GiB, or off", flag, s)
	}
	return int64(f * mult), nil
}
