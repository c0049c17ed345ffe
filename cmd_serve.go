package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"superfluid/cgo"
	"superfluid/chat"
	"superfluid/engine"
	"superfluid/fim"
	"superfluid/gguf"
	sfhttp "superfluid/http"
	"superfluid/kv"
	"superfluid/sched"
)

func env(name string) []string { return []string{"SUPERFLUID_" + name} }

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "serve the OpenAI, llama.cpp, Ollama and Anthropic APIs over one model",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "GGUF file", EnvVars: env("MODEL")},
			&cli.StringFlag{Name: "host", Value: "127.0.0.1", Usage: "address to listen on", EnvVars: env("HOST")},
			&cli.IntFlag{Name: "port", Value: 8080, Usage: "port to listen on (0: any free port)", EnvVars: env("PORT")},
			&cli.IntFlag{Name: "lanes", Value: 4, Usage: "requests decoded at once", EnvVars: env("LANES")},
			&cli.IntFlag{Name: "ctx", Value: 16384, Usage: "context tokens, shared by every lane and the prefix cache", EnvVars: env("CTX")},
			&cli.IntFlag{Name: "seqs", Value: 0, Usage: "engine sequences: lanes plus cached conversations (0: 4 per lane)", EnvVars: env("SEQS")},
			&cli.IntFlag{Name: "threads", Value: runtime.NumCPU(), Usage: "CPU threads", EnvVars: env("THREADS")},
			&cli.IntFlag{Name: "batch", Value: 512, Usage: "most tokens one engine step carries", EnvVars: env("BATCH")},
			&cli.StringFlag{Name: "kv-type", Value: "f16", Usage: "KV cache type: f16, q8_0 or q4_0", EnvVars: env("KV_TYPE")},
			&cli.StringFlag{Name: "class-lanes", Usage: "lane caps per class, e.g. background=2,agent=6", EnvVars: env("CLASS_LANES")},
			&cli.StringFlag{Name: "default-class", Value: "chat", Usage: "class of requests that name none: chat, agent or background", EnvVars: env("DEFAULT_CLASS")},
			&cli.StringFlag{Name: "api-key", Usage: "require this key (Authorization: Bearer KEY or x-api-key) on every route but /health", EnvVars: env("API_KEY")},
			&cli.StringFlag{Name: "alias", Usage: "the model name clients see (default: the file name without .gguf)", EnvVars: env("ALIAS")},
			&cli.IntFlag{Name: "max-body", Value: 16 << 20, Usage: "largest request body in bytes", EnvVars: env("MAX_BODY")},
			&cli.Int64Flag{Name: "host-cache", Value: 1 << 30, Usage: "bytes of host memory for evicted conversation state (0: off)", EnvVars: env("HOST_CACHE")},
			&cli.DurationFlag{Name: "drain", Value: 30 * time.Second, Usage: "how long shutdown waits for running requests", EnvVars: env("DRAIN")},
		},
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
	srv, err := sfhttp.NewServer(sfhttp.Config{APIKey: c.String("api-key"), MaxBody: c.Int("max-body"), DefaultClass: defClass, Drain: c.Duration("drain"), Version: version})
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(c.String("host"), strconv.Itoa(c.Int("port")))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	slog.Info("listening; loading the model", "addr", ln.Addr().String())

	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	st, err := loadStack(c, lanes, classLanes)
	if err != nil {
		srv.Shutdown(context.Background())
		return err
	}
	defer st.eng.Close()
	schedDone := make(chan error, 1)
	schedCtx, stopSched := context.WithCancel(context.Background())
	go func() { schedDone <- st.sched.Run(schedCtx) }()
	srv.SetModel(st.model)
	slog.Info("ready", "addr", "http://"+ln.Addr().String(), "model", st.model.Name, "lanes", lanes, "ctx", st.model.Desc.Ctx, "fim", st.model.FIM != nil && st.model.FIM.Capable())

	select {
	case <-ctx.Done():
		slog.Info("shutting down: draining running requests")
	case err := <-serveErr:
		stopSched()
		<-schedDone
		return fmt.Errorf("serve: %w", err)
	}
	err = srv.Shutdown(context.Background())
	stopSched()
	if e := <-schedDone; e != nil && err == nil {
		err = e
	}
	slog.Info("stopped")
	return err
}

// stack is a loaded model with its scheduler and cache.
type stack struct {
	eng   *cgo.Engine
	sched *sched.Scheduler
	cache *kv.Cache
	model *sfhttp.Model
}

func loadStack(c *cli.Context, lanes int, classLanes sched.ClassLanes) (*stack, error) {
	path := c.String("model")
	seqs := c.Int("seqs")
	if seqs <= 0 {
		seqs = 4 * lanes
	}
	eng, err := cgo.Open(cgo.Options{ModelPath: path, Ctx: c.Int("ctx"), Lanes: lanes, Seqs: seqs, Batch: c.Int("batch"), Threads: c.Int("threads"), KVType: c.String("kv-type")})
	if err != nil {
		return nil, err
	}
	desc := eng.Descriptor()
	cache, err := kv.New(eng, kv.Config{Seqs: desc.Seqs, MaxResidentTokens: desc.Ctx / 2, HostBytes: c.Int64("host-cache")})
	if err != nil {
		eng.Close()
		return nil, err
	}
	s, err := sched.New(eng, cache, sched.Config{Lanes: lanes, ClassLanes: classLanes})
	if err != nil {
		eng.Close()
		return nil, err
	}
	name := c.String("alias")
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	m := &sfhttp.Model{Name: name, Path: path, Desc: desc, Text: eng, Sched: s, Cache: cacheMetrics{cache}}
	m.Chat = loadChatTemplate(path, desc, eng)
	m.FIM = loadFIM(desc, eng)
	return &stack{eng: eng, sched: s, cache: cache, model: m}, nil
}

// loadChatTemplate parses the model's chat template (ChatML when it has
// none). A template the renderer cannot parse leaves chat endpoints
// answering 400 rather than rendering garbage.
func loadChatTemplate(path string, desc *engine.Descriptor, eng *cgo.Engine) *chat.Template {
	src, opts := chat.ChatML, chat.Options{}
	if f, err := gguf.Open(path); err == nil {
		if s, o, ok := chat.FromGGUF(f); ok {
			src, opts = s, o
		} else {
			opts = o
		}
	}
	opts.TokenizerAddsBOS = desc.AddBOS
	if opts.BOS == "" && desc.BOS >= 0 {
		opts.BOS = string(eng.AppendPiece(nil, desc.BOS, true))
	}
	t, err := chat.Parse(src, opts)
	if err != nil {
		slog.Warn("the model's chat template cannot be used; chat endpoints will refuse requests", "err", err)
		return nil
	}
	return t
}

func loadFIM(desc *engine.Descriptor, eng *cgo.Engine) *fim.Builder {
	b, err := fim.NewBuilder(fim.Config{
		FIM: desc.FIM, NumTokens: desc.Vocab, BOS: desc.BOS, AddBOS: desc.AddBOS,
		TokenText: func(t engine.Token) string { return string(eng.AppendPiece(nil, t, true)) },
	})
	if err != nil && !errors.Is(err, fim.ErrNoFIM) {
		slog.Warn("fill-in-the-middle unavailable", "err", err)
	}
	return b
}

// cacheMetrics exposes the prefix cache's counters on /metrics.
type cacheMetrics struct{ c *kv.Cache }

func (m cacheMetrics) Metrics() []sfhttp.Metric {
	st := m.c.Stats()
	return []sfhttp.Metric{
		{Name: "cache_hits_total", Help: "Admissions that found a cached prefix.", Type: "counter", Value: float64(st.Hits.Load())},
		{Name: "cache_misses_total", Help: "Admissions that found nothing cached.", Type: "counter", Value: float64(st.Misses.Load())},
		{Name: "cache_warm_tokens_total", Help: "Prompt tokens served from the cache.", Type: "counter", Value: float64(st.WarmTokens.Load())},
		{Name: "cache_host_hits_total", Help: "Prefixes restored from host memory.", Type: "counter", Value: float64(st.HostHits.Load())},
		{Name: "cache_evictions_total", Help: "Cache entries evicted from the KV pool.", Type: "counter", Value: float64(st.Evictions.Load())},
		{Name: "cache_entries", Help: "Cached conversations by tier.", Type: "gauge", Labels: `tier="resident"`, Value: float64(st.Entries.Load())},
		{Name: "cache_entries", Help: "Cached conversations by tier.", Type: "gauge", Labels: `tier="host"`, Value: float64(st.HostEntries.Load())},
		{Name: "cache_resident_tokens", Help: "Tokens cached entries hold in the KV pool.", Type: "gauge", Value: float64(st.ResidentTokens.Load())},
		{Name: "cache_host_bytes", Help: "Bytes of conversation state in host memory.", Type: "gauge", Value: float64(st.HostBytes.Load())},
	}
}
