package http

import (
	"context"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/engine"
	"superfluid/metric"
	"superfluid/sched"
	"superfluid/task"
)

// benchSched is a busy scheduler's counters, standing still.
type benchSched struct{ st sched.Snapshot }

func (b *benchSched) Submit(context.Context, sched.Request) (*sched.Stream, error) {
	return nil, context.Canceled
}
func (b *benchSched) Stats() sched.Snapshot { return b.st }

// Expect: no runner here gathers bursts.
func (b *benchSched) Expect() func() { return func() {} }

// benchTTFT stands for the scheduler's own (unexported) definition.
var benchTTFT = metric.NewHistogramDef("superfluid_ttft_seconds", "Time from submission to the first token.",
	[]float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40}, "class")

func newBenchSched() *benchSched {
	st := sched.Snapshot{Ticks: 123456, PrefillTokens: 9876543, DecodeTokens: 1234567, Admissions: 4321,
		Completed: 4300, LanesActive: 3, PrefillBudget: 512, TTFT: new([sched.NumClasses]*metric.Histogram),
		QueueDepth: [sched.NumClasses]int64{2, 0, 1, 0}, KVTokens: 3000, KVCapacity: 4096,
		DecodeCalls: 1000, BusySlots: 2500, PromptNS: 2e9, PredictSteps: 500, PredictNS: 1e9}
	for c := range st.TTFT {
		st.TTFT[c] = benchTTFT.New(sched.Class(c).String())
	}
	for i := range 100 {
		st.TTFT[sched.Chat].Observe(float64(i) / 20)
	}
	return &benchSched{st: st}
}

// benchCache stands for the prefix cache's thirteen samples.
type benchCache struct{}

var (
	benchCacheCounter = metric.Counter("bench_cache_hits_total", "Admissions that found a cached prefix.", "kind")
	benchCacheEntries = metric.Gauge("bench_cache_entries", "Cached conversations by tier.", "tier")
)

func (benchCache) AddMetrics(p *metric.Page) {
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		p.Add(benchCacheCounter, 98765, k)
	}
	for _, t := range []string{"resident", "host", "parked"} {
		p.Add(benchCacheEntries, 42, t)
	}
}

// benchModels is a two-model server.
type benchModels struct{ loaded []LoadedModel }

func (b benchModels) Acquire(context.Context, ModelWant) (*Model, func(), error) {
	return b.loaded[0].Model, func() {}, nil
}
func (b benchModels) Available() []ModelInfo { return nil }
func (b benchModels) Loaded() []LoadedModel  { return b.loaded }
func (b benchModels) FIMName() string        { return "" }

// twoModelServer is a server with two generation models loaded.
func twoModelServer() (*Server, []LoadedModel) {
	var loaded []LoadedModel
	for _, name := range []string{"chat", "coder"} {
		m := &Model{Model: task.Model{Name: name, Sched: newBenchSched(),
			Desc: &engine.Descriptor{CacheTypeK: "f16", CacheTypeV: "f16", KVBytesPerToken: 114688}}, Cache: benchCache{}}
		loaded = append(loaded, LoadedModel{Model: m, Size: 1 << 30, InFlight: 2})
	}
	s := &Server{}
	s.SetModels(benchModels{loaded: loaded})
	return s, loaded
}

// /metrics is well-formed Prometheus text: each family's HELP and TYPE
// once, before its samples; the named model's samples unlabelled, every
// loaded model's labelled by model, its labels in their documented order.
func TestMetricsPageTwoModels(t *testing.T) {
	s, loaded := twoModelServer()
	var ctx fasthttp.RequestCtx
	if err := s.metrics(&ctx, loaded[1].Model); err != nil {
		t.Fatal(err)
	}
	body := string(ctx.Response.Body())
	typed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, _, _ = strings.Cut(name, " ")
			if typed[name] {
				t.Errorf("second TYPE for %s", name)
			}
			typed[name] = true
			continue
		}
		if strings.HasPrefix(line, "# HELP ") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		family := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if f, ok := strings.CutSuffix(name, suffix); ok && typed[f] {
				family = f
			}
		}
		if !typed[family] {
			t.Errorf("sample before its TYPE: %q", line)
		}
	}
	for _, want := range []string{
		"superfluid_decode_tokens_total 1234567\n",
		"superfluid_lanes_active 3\n",
		`superfluid_queue_depth{class="chat"} 2` + "\n",
		`superfluid_ttft_seconds_bucket{class="chat",le="+Inf"} 100` + "\n",
		`superfluid_ttft_seconds_bucket{class="fim",le="+Inf"} 0` + "\n",
		"llamacpp:prompt_tokens_total 9876543\n",
		"llamacpp:n_busy_slots_per_decode 2.5\n",
		"llamacpp:requests_processing 3\n",
		"llamacpp:requests_deferred 3\n",
		"llamacpp:predicted_tokens_seconds 500\n", // the first scrape: since the start
		`vllm:num_requests_waiting{model_name="chat"} 3` + "\n",
		`vllm:num_requests_running{model_name="coder"} 3` + "\n",
		`vllm:kv_cache_usage_perc{model_name="coder"} 0.732421875` + "\n",
		`vllm:cache_config_info{block_size="1",num_gpu_blocks="4096"} 1` + "\n",
		"superfluid_trace_spans_dropped_total 0\n",
		"superfluid_models_loaded 2\n",
		`superfluid_model_kv_bytes_per_token{model="coder",cache_type_k="f16",cache_type_v="f16"} 114688` + "\n",
		`superfluid_model_decode_tokens_total{model="chat"} 1234567` + "\n",
		"# HELP go_goroutines Number of goroutines that currently exist.\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in /metrics:\n%s", want, body)
		}
	}
}

// BenchmarkMetricsTwoModels renders /metrics for a server with two
// generation models loaded, the default one named.
func BenchmarkMetricsTwoModels(b *testing.B) {
	s, loaded := twoModelServer()
	var ctx fasthttp.RequestCtx
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		if err := s.metrics(&ctx, loaded[0].Model); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ctx.Response.Body())), "bytes/page")
}
