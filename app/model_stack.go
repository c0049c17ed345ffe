package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"superfluid/cgo"
	sfhttp "superfluid/http"
	"superfluid/kv"
	"superfluid/sched"
	"superfluid/task"
)

// ModelSpec names one model file and what clients call it.
type ModelSpec struct {
	Path  string
	Alias string // default: the file name without .gguf
	// LoRA are adapters loaded with the model (serve --lora).
	LoRA []LoRAFile
	// MMProj is the model's projector (serve --mmproj); "" finds
	// one beside the model (app/media.go) or none.
	MMProj string
}

// LoRAFile is one LoRA adapter and its initial global scale.
type LoRAFile struct {
	Path  string
	Scale float32
}

// modelStack is one loaded model: its engine, prefix cache, scheduler and
// the HTTP view of them (an embedding model has an embedding runner
// instead of the cache and scheduler: both nil). The registry owns it;
// close parks its cache.
type modelStack struct {
	Engine *cgo.Engine
	Cache  *kv.Cache
	Sched  *sched.Scheduler
	Model  *sfhttp.Model
	// Size is the memory the model holds, measured once loaded: the
	// weights llama.cpp loaded, the KV pool of its context, the host
	// cache budget.
	Size int64

	turn      *sched.Turn  // its place at the process's arbiter; nil without one
	drafter   *cgo.Drafter // the draft model's engine (--spec-draft-model); nil without one
	media     *cgo.Media   // the projector (vision, audio or both); nil without one
	stopSched context.CancelFunc
	schedDone chan error
}

// openModelStack loads the model at spec.Path with o's engine, cache and
// scheduler settings (o.ModelPath and o.Alias are ignored) and starts its
// scheduler, which takes its steps in turn with the other engines of arb
// (nil: alone). It is the one way a model is loaded — resident at start or
// on demand — so a model of another kind (an embedding model) needs only
// another such builder.
func openModelStack(spec ModelSpec, o Options, arb *sched.Arbiter) (ms *modelStack, err error) {
	if isEmbeddingModel(spec.Path) {
		return openEmbeddingStack(spec, o, arb)
	}
	if err := checkParkOptions(o); err != nil {
		return nil, err
	}
	var turn *sched.Turn
	if arb != nil {
		turn = arb.Join(spec.Alias)
		o.Sched.Arbiter = turn
		defer func() {
			if err != nil {
				turn.Leave()
			}
		}()
	}
	start := time.Now()
	var loraPaths []string
	var loraScales []float32
	for _, f := range spec.LoRA {
		loraPaths, loraScales = append(loraPaths, f.Path), append(loraScales, f.Scale)
	}
	eng, err := cgo.Open(cgo.Options{ModelPath: spec.Path, Ctx: o.Ctx, Lanes: o.Lanes, Seqs: engineSeqs(spec.Path, o), Batch: o.Batch, UBatch: o.UBatch, Threads: o.Threads, CacheTypeK: o.CacheTypeK, CacheTypeV: o.CacheTypeV, FlashAttn: o.FlashAttn, NoRepack: o.NoRepack, Poll: o.Poll,
		LoRA: loraPaths, MTP: wantsMTP(spec, o), DraftMax: draftBound(spec, o)})
	if err != nil {
		if wantsMTP(spec, o) {
			return nil, fmt.Errorf("--spec-type %s: %w", sched.SpecDraftMTP, err)
		}
		return nil, err
	}
	drafter, err := openDrafter(spec, &o, eng)
	if err != nil {
		eng.Close()
		return nil, err
	}
	if drafter != nil {
		defer func() {
			if err != nil {
				drafter.Engine().Close()
			}
		}()
	}
	var mm *cgo.Media
	if path := mmprojFor(spec); path != "" {
		if mm, err = eng.OpenMedia(path, o.Threads); err != nil {
			if drafter != nil {
				drafter.Engine().Close()
				drafter = nil
			}
			eng.Close()
			return nil, fmt.Errorf("model %s: projector: %w", spec.Alias, err)
		}
		defer func() {
			if err != nil {
				mm.Close()
			}
		}()
	}
	desc := eng.Descriptor()
	tuneGC()
	tmpl, tmplRefused, err := LoadChatTemplate(spec.Path, o.ChatTemplateFile, desc, eng)
	if err != nil {
		eng.Close()
		return nil, err
	}
	ps, err := openPark(o, desc)
	if err != nil {
		eng.Close()
		return nil, err
	}
	cache, err := kv.New(eng, kv.Config{Seqs: desc.Seqs, MaxResidentTokens: residentBudget(desc, o.HostCache),
		MaxWindowResidentTokens: windowResidentBudget(desc, o.HostCache), HostBytes: max(o.HostCache, 0), Watermarks: o.Pressure.Watermarks,
		Park: ps, ParkEager: o.ParkEager && ps != nil, ParkIdle: parkIdle(o, ps)})
	if err != nil {
		if ps != nil {
			ps.Close()
		}
		eng.Close()
		return nil, err
	}
	o.Sched.Observer = o.Tracing.Scheduler(spec.Alias)
	sc, err := sched.New(eng, cache, o.Sched)
	if err != nil {
		cache.Close()
		eng.Close()
		return nil, err
	}
	ms = &modelStack{Engine: eng, Cache: cache, Sched: sc, Size: measuredSize(desc, o.HostCache), turn: turn, drafter: drafter, media: mm}
	if drafter != nil {
		ms.Size += measuredSize(drafter.Engine().Descriptor(), 0)
	}
	ms.Model = &sfhttp.Model{Model: task.Model{Name: spec.Alias, Path: spec.Path, Desc: desc, Text: eng, Sched: sc, FIMGate: o.HTTP.FIMGate}, Cache: cacheMetrics{cache}}
	if len(loraPaths) > 0 {
		ms.Model.LoRA = task.NewAdapters(loraPaths, loraScales)
	}
	if mm != nil {
		ms.Model.Media = projector{mm}
		if why := mm.AudioRefused(); why != "" {
			slog.Warn("projector: its audio is refused", "model", spec.Alias, "why", why)
		}
	}
	ms.Model.Chat, ms.Model.ChatRefused = tmpl, tmplRefused
	ms.Model.FIM = loadFIM(desc, eng)
	ms.Model.Prepare()
	ctx, cancel := context.WithCancel(context.Background())
	ms.stopSched, ms.schedDone = cancel, make(chan error, 1)
	go func() { ms.schedDone <- sc.Run(ctx) }()
	slog.Info("model loaded", "model", spec.Alias, "took", time.Since(start).Round(time.Millisecond), "lanes", o.Lanes, "ctx", desc.Ctx,
		"fim", ms.Model.FIM != nil && ms.Model.FIM.Capable(), "bytes", ms.Size, "repacked_weight_bytes", eng.RepackedBytes(),
		"cache_type_k", desc.CacheTypeK, "cache_type_v", desc.CacheTypeV, "kv_bytes_per_token", desc.KVBytesPerToken)
	return ms, nil
}

// close stops the scheduler, parks what the cache holds and frees the
// engine. No request may hold the model (the registry's count says so).
func (ms *modelStack) close() error {
	ms.stopSched()
	err := <-ms.schedDone
	if ms.turn != nil {
		ms.turn.Leave() // after Run returned, as the arbiter wants
	}
	if ms.Cache != nil {
		if e := ms.Cache.Close(); e != nil && err == nil { // parks what is cached
			err = e
		}
	}
	if ms.media != nil {
		ms.media.Close() // before the engine whose model it reads
	}
	ms.Engine.Close()
	if ms.drafter != nil {
		ms.drafter.Engine().Close()
	}
	return err
}
