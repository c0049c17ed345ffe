package command

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"superfluid/app"
	sfhttp "superfluid/http"
	"superfluid/pull"
	"superfluid/sched"
	"superfluid/task"
	"superfluid/tracing"
)

func env(name string) []string { return []string{"SUPERFLUID_" + name} }

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve the OpenAI, llama.cpp, Ollama and Anthropic APIs over one or more models",
		Flags: slices.Concat([]cli.Flag{
			&cli.StringSliceFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "GGUF file or pulled model name, loaded at start and kept loaded; repeat it for several (the first answers requests that name no model)", EnvVars: env("MODEL")},
			&cli.IntFlag{Name: "max-models", Usage: "models loaded at once; the least recently used idle one loaded on demand (from the models directory) is unloaded for another (0: 3, or the number of resident models if more)", EnvVars: env("MAX_MODELS")},
			&cli.StringFlag{Name: "memory-budget", Usage: "bytes the loaded models may hold together (weights, KV pool, host cache each), e.g. 12GiB (default: 80% of the memory available at start; off: no bound)", EnvVars: env("MEMORY_BUDGET")},
			&cli.DurationFlag{Name: "keep-alive", Value: 5 * time.Minute, Usage: "how long a model loaded on demand stays loaded after its last request, unless the request's keep_alive says (<0: for ever)", EnvVars: env("KEEP_ALIVE")},
			&cli.StringFlag{Name: "fim-model", Usage: "GGUF file or pulled model name that answers every fill-in-the-middle request (/infill, suffix on OpenAI and Ollama), whatever model it names", EnvVars: env("FIM_MODEL")},
			dataDirFlag(),
			modelsDirFlag(),
			&cli.StringFlag{Name: "host", Value: "127.0.0.1", Usage: "address to listen on", EnvVars: env("HOST")},
			&cli.IntFlag{Name: "port", Value: 8080, Usage: "port to listen on (0: any free port)", EnvVars: env("PORT")},
		}, engineFlags(4), loraFlags(), []cli.Flag{mmprojFlag()}, remoteMediaFlags(), []cli.Flag{
			&cli.IntFlag{Name: "seqs", Value: 0, Usage: "engine sequences: lanes plus cached conversations (0: 4 per lane; lanes + 2 on a sliding-window model, whose window cache grows with them)", EnvVars: env("SEQS")},
			&cli.StringFlag{Name: "class-lanes", Usage: "lane caps per class, e.g. background=2,agent=6", EnvVars: env("CLASS_LANES")},
			&cli.StringFlag{Name: "spec-type", Value: "none", Usage: "speculative decoding's draft source: none, ngram-simple (the tokens that followed the last occurrence of the reply's latest tokens in the prompt and reply) draft-simple (a draft model, --spec-draft-model) or draft-mtp (the model's own multi-token prediction layers; refused on a model without them); drafts ride in the multi-lane step, each lane's only while they measurably pay", EnvVars: env("SPEC_TYPE")},
			&cli.StringFlag{Name: "spec-draft-model", Usage: "draft model for --spec-type draft-simple: a small GGUF with the model's vocabulary", EnvVars: env("SPEC_DRAFT_MODEL")},
			&cli.Float64Flag{Name: "spec-draft-p-min", Usage: "the draft model ends a draft at a token it gives less than this probability (0: never)", EnvVars: env("SPEC_DRAFT_P_MIN")},
			&cli.IntFlag{Name: "spec-draft-n-max", Value: 4, Usage: "most draft tokens a lane carries in one step", EnvVars: env("SPEC_DRAFT_N_MAX")},
			&cli.IntFlag{Name: "spec-draft-n-min", Value: 1, Usage: "fewest draft tokens worth carrying; a shorter draft is dropped", EnvVars: env("SPEC_DRAFT_N_MIN")},
			&cli.Float64Flag{Name: "spec-synth-len", Usage: "benchmarking only: commit drafts as if accepted at this mean length per step, the model's own token included (1 to --spec-draft-n-max + 1), whatever they hold; output is not valid", EnvVars: env("SPEC_SYNTH_LEN")},
			&cli.StringFlag{Name: "spec-synth-rates", Usage: "benchmarking only: P0,P1,… the probability each draft position is committed (--spec-draft-n-max values, non-increasing); output is not valid", EnvVars: env("SPEC_SYNTH_RATES")},
			&cli.StringFlag{Name: "default-class", Value: "chat", Usage: "class of requests that name none: chat, agent or background", EnvVars: env("DEFAULT_CLASS")},
			&cli.Float64Flag{Name: "fim-rate", Value: task.DefaultFIMRate, Usage: "inline completions (FIM) a second the server takes, whatever the client; past it they are refused at once with 429 and retry_after_ms instead of queueing (<0: no bound)", EnvVars: env("FIM_RATE")},
			&cli.IntFlag{Name: "fim-burst", Value: task.DefaultFIMBurst, Usage: "inline completions that may come at once above --fim-rate", EnvVars: env("FIM_BURST")},
			&cli.StringFlag{Name: "api-key", Usage: "require this key (Authorization: Bearer KEY or x-api-key) on every route but /health", EnvVars: env("API_KEY")},
			&cli.StringFlag{Name: "api-keys-file", Usage: "JSON file of named API keys, each with its classes, models, lane cap and requests/tokens per minute (README: API keys); a value starting with { is the JSON itself; reloaded on SIGHUP", EnvVars: []string{"SUPERFLUID_API_KEYS_FILE", "SUPERFLUID_API_KEYS"}},
			chatTemplateFileFlag(),
			keepBillingHeaderFlag(),
			&cli.StringFlag{Name: "alias", Usage: "the name clients see for the first model given (default: the file name without .gguf)", EnvVars: env("ALIAS")},
			&cli.IntFlag{Name: "max-body", Value: 16 << 20, Usage: "largest file upload (/v1/files) in bytes; also caps every other route's own limit (8 MiB for prompts and conversations, 64 KiB for the rest)", EnvVars: env("MAX_BODY")},
			&cli.StringSliceFlag{Name: "allowed-origins", Usage: "web origins (scheme://host[:port], one * each, or * for all) whose pages may use the server, beside localhost, 127.0.0.1, [::1], 0.0.0.0 (any port, http/https), app://, file://, tauri://, vscode-webview:// and the server's own; comma-separated", EnvVars: []string{"SUPERFLUID_ALLOWED_ORIGINS", "SUPERFLUID_ORIGINS"}},
			&cli.IntFlag{Name: "max-conns-per-ip", Value: 256, Usage: "connections one client address may hold open (<0: no bound)", EnvVars: env("MAX_CONNS_PER_IP")},
			&cli.DurationFlag{Name: "header-timeout", Value: 10 * time.Second, Usage: "how long a connection may take to send a request's headers before it is closed", EnvVars: env("HEADER_TIMEOUT")},
			&cli.Int64Flag{Name: "host-cache", Value: 1 << 30, Usage: "bytes of host memory for evicted conversation state (0: off)", EnvVars: env("HOST_CACHE")},
			&cli.StringFlag{Name: "park-dir", Value: defaultParkDir(), Usage: "directory where conversations are parked on disk, zstd-compressed, to resume warm even after a restart (off: none)", EnvVars: env("PARK_DIR")},
			&cli.Int64Flag{Name: "park-budget", Value: 8 << 30, Usage: "bytes each model's park files may hold (its subdirectory of --park-dir); least recently used files go first (<0: unbounded)", EnvVars: env("PARK_BUDGET")},
			&cli.BoolFlag{Name: "park-eager", Usage: "park every conversation as its request ends, not only when it leaves memory (a crash then loses nothing)", EnvVars: env("PARK_EAGER")},
			&cli.DurationFlag{Name: "park-idle", Value: 5 * time.Minute, Usage: "park conversations idle this long and free their memory (0: never)", EnvVars: env("PARK_IDLE")},
			&cli.BoolFlag{Name: "park-lossy", Usage: "demote parked f16 KV state to 8 bits: files half the size, but resumed conversations may continue differently", EnvVars: env("PARK_LOSSY")},
			&cli.DurationFlag{Name: "drain", Value: 30 * time.Second, Usage: "how long shutdown waits for running requests", EnvVars: env("DRAIN")},
			&cli.DurationFlag{Name: "write-timeout", Value: 30 * time.Second, Usage: "how long a response's writes may make no progress (a client that stopped reading) before its connection is closed and its generation cancelled", EnvVars: env("WRITE_TIMEOUT")},
		}, pressureFlags(), diskQuotaFlags()),
		Action: serveAction,
	}
}

func serveAction(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("serve: unexpected argument %q", c.Args().First())
	}
	lanes := c.Int("lanes")
	if lanes < 1 || lanes > 64 {
		return fmt.Errorf("serve: --lanes %d outside [1, 64]", lanes)
	}
	classLanes, err := sched.ParseClassLanes(c.String("class-lanes"), lanes)
	if err != nil {
		return err
	}
	defClass, err := sched.ParseClass(c.String("default-class"))
	if err != nil {
		return err
	}
	spec, err := speculationOption(c)
	if err != nil {
		return err
	}
	if c.Duration("write-timeout") <= 0 {
		return fmt.Errorf("serve: --write-timeout %v must be positive", c.Duration("write-timeout"))
	}
	if c.Duration("header-timeout") <= 0 {
		return fmt.Errorf("serve: --header-timeout %v must be positive", c.Duration("header-timeout"))
	}
	if c.Int("max-conns-per-ip") == 0 {
		return fmt.Errorf("serve: --max-conns-per-ip 0 would refuse every connection (<0: no bound)")
	}
	if c.Float64("fim-rate") == 0 || c.Int("fim-burst") < 1 {
		return fmt.Errorf("serve: --fim-rate %g --fim-burst %d would refuse every inline completion (--fim-rate <0: no bound)", c.Float64("fim-rate"), c.Int("fim-burst"))
	}
	pressureOpts, err := pressureOptions(c)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	models, err := serveModels(c)
	if err != nil {
		return err
	}
	budget, err := parseMemoryBudget(c.String("memory-budget"))
	if err != nil {
		return err
	}
	quotas, err := diskQuotas(c)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fimPath := ""
	if f := c.String("fim-model"); f != "" {
		if fimPath, err = pull.Resolve(f, modelsDir(c)); err != nil {
			return fmt.Errorf("serve: --fim-model: %w", err)
		}
	}
	poll, err := pollOption(c)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	typeK, typeV, err := cacheTypes(c, c.String("flash-attn"))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	hostCache := c.Int64("host-cache")
	if hostCache == 0 {
		hostCache = -1 // app: <0 is off
	}
	tr, err := tracing.FromEnv(c.Context, os.Getenv, version)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	if tr != nil {
		slog.Info("tracing: spans exported over OTLP/HTTP", "max_queue", tr.Stats().Max)
	}
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	apiKeys, err := openKeys(ctx, c.String("api-keys-file"))
	if err != nil {
		return fmt.Errorf("serve: --api-keys-file: %w", err)
	}
	addr := net.JoinHostPort(c.String("host"), strconv.Itoa(c.Int("port")))
	lora, err := loraFiles(c)
	if err != nil {
		return err
	}
	st, err := app.Start(addr, app.Options{
		ModelPath: models[0].Path, Alias: c.String("alias"), LoRA: lora, MMProj: c.String("mmproj"), Models: models[1:], ModelsDir: modelsDir(c),
		MaxModels: c.Int("max-models"), MemoryBudget: budget, KeepAlive: keepAlive(c.Duration("keep-alive")), FIMModelPath: fimPath,
		Lanes: lanes, Ctx: c.Int("ctx"), Seqs: c.Int("seqs"),
		Threads: c.Int("threads"), Batch: c.Int("batch"), UBatch: c.Int("ubatch"), CacheTypeK: typeK, CacheTypeV: typeV, FlashAttn: c.String("flash-attn"), NoRepack: c.Bool("no-repack"), Poll: poll, HostCache: hostCache,
		ChatTemplateFile: c.String("chat-template-file"),
		ParkDir:          dirOrOff(c.String("park-dir")), ParkBudget: c.Int64("park-budget"), ParkEager: c.Bool("park-eager"),
		ParkIdle: c.Duration("park-idle"), ParkLossy: c.Bool("park-lossy"),
		DataDir:  dirOrOff(c.String("data-dir")),
		Disk:     quotas,
		FIM:      task.FIMRate{Rate: c.Float64("fim-rate"), Burst: c.Int("fim-burst")},
		Pressure: pressureOpts,
		Sched:    sched.Config{ClassLanes: classLanes, Speculation: spec},
		HTTP: sfhttp.Config{APIKey: c.String("api-key"), Keys: apiKeys, MaxBody: c.Int("max-body"), DefaultClass: defClass, Drain: c.Duration("drain"),
			WriteTimeout: c.Duration("write-timeout"), Version: version, KeepBillingHeader: c.Bool("keep-billing-header"), RemoteMedia: remoteMedia(c),
			AllowedOrigins: c.StringSlice("allowed-origins"), MaxConnsPerIP: c.Int("max-conns-per-ip"), HeaderTimeout: c.Duration("header-timeout")},
		Tracing: tr,
	})
	if err != nil {
		_ = tr.Shutdown(context.Background())
		return err
	}
	slog.Info("ready", "url", st.URL(), "model", st.Model.Name)
	select {
	case <-ctx.Done():
		slog.Info("shutting down: draining running requests")
	case err := <-st.ServeErr():
		st.Close()
		return fmt.Errorf("serve: %w", err)
	}
	err = st.Close()
	slog.Info("stopped")
	return err
}

// serveModels resolves every --model (a file or a models directory name).
func serveModels(c *cli.Context) ([]app.ModelSpec, error) {
	var out []app.ModelSpec
	for _, arg := range c.StringSlice("model") {
		p, err := pull.Resolve(arg, modelsDir(c))
		if err != nil {
			return nil, err
		}
		out = append(out, app.ModelSpec{Path: p})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("serve: no --model given")
	}
	return out, nil
}

// keepAlive maps --keep-alive 0 (which app reads as "the default") to an
// immediate expiry: a nanosecond.
func keepAlive(d time.Duration) time.Duration {
	if d == 0 {
		return time.Nanosecond
	}
	return d
}

// parseMemoryBudget reads --memory-budget: "" is the default (0 to app),
// "off" no bound (<0), else a byte count with an optional unit (kB, MB,
// GB, KiB, MiB, GiB, TiB).
func parseMemoryBudget(s string) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, nil
	}
	n, err := parseByteSize("--memory-budget", s)
	if err != nil {
		return 0, fmt.Errorf("serve: %w", err)
	}
	return n, nil
}

// speculationOption reads the --spec-* flags (llama-server's names).
func speculationOption(c *cli.Context) (sched.Speculation, error) {
	t, err := sched.ParseSpecType(c.String("spec-type"))
	if err != nil {
		return sched.Speculation{}, fmt.Errorf("serve: --spec-type: %w", err)
	}
	s := sched.Speculation{Type: t, DraftMax: c.Int("spec-draft-n-max"), DraftMin: c.Int("spec-draft-n-min"),
		DraftModel: c.String("spec-draft-model"), DraftPMin: c.Float64("spec-draft-p-min")}
	if s.DraftMax < 1 || s.DraftMin < 1 {
		return sched.Speculation{}, fmt.Errorf("serve: --spec-draft-n-max %d and --spec-draft-n-min %d must be at least 1", s.DraftMax, s.DraftMin)
	}
	var rates []float64
	if v := strings.TrimSpace(c.String("spec-synth-rates")); v != "" {
		for _, f := range strings.Split(v, ",") {
			r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				return sched.Speculation{}, fmt.Errorf("serve: --spec-synth-rates: %q is not a number", f)
			}
			rates = append(rates, r)
		}
	}
	if s.SynthRates, err = sched.SynthRates(rates, c.Float64("spec-synth-len"), s.DraftMax); err != nil {
		return sched.Speculation{}, fmt.Errorf("serve: --spec-synth-*: %w", err)
	}
	if err := s.Check(); err != nil {
		return sched.Speculation{}, fmt.Errorf("serve: %w", err)
	}
	if len(s.SynthRates) > 0 {
		slog.Warn("synthetic speculative acceptance is on, for benchmarking: drafts are committed whatever they hold, and the output is not valid", "rates", s.SynthRates)
	}
	return s, nil
}
