package live

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/http/wire/wiretest"
	"superfluid/kv"
	"superfluid/sched"
	"superfluid/status"
	"superfluid/task"
	"superfluid/task/tasktest"
)

// fakeSched is a scheduler whose lanes, queues and counters the test
// sets; it runs nothing.
type fakeSched struct {
	mu    sync.Mutex
	lanes int
	snap  sched.Snapshot
	occ   sched.Occupancy
}

func (f *fakeSched) Submit(context.Context, sched.Request) (*sched.Stream, error) {
	return nil, errors.New("fakeSched runs nothing")
}
func (f *fakeSched) Config() sched.Config { return sched.Config{Lanes: f.lanes} }
func (f *fakeSched) Expect() func()       { return func() {} }
func (f *fakeSched) Stats() sched.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}
func (f *fakeSched) Occupancy() sched.Occupancy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sched.Occupancy{Lanes: append([]sched.LaneView(nil), f.occ.Lanes...), Queues: f.occ.Queues}
}

func (f *fakeSched) set(fn func(f *fakeSched)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// fakeCache is a prefix cache's view and counters.
type fakeCache struct {
	stats kv.Stats
	view  []kv.Entry
}

func (c *fakeCache) View() []kv.Entry { return c.view }
func (c *fakeCache) Stats() *kv.Stats { return &c.stats }

// host is wiretest's server-less host with loaded models and a stop.
type host struct {
	wiretest.Host
	loaded   func() []wire.LoadedEntry
	stopping context.Context
}

func (h host) Loaded(*fasthttp.RequestCtx) []wire.LoadedEntry { return h.loaded() }
func (h host) Stopping() context.Context                      { return h.stopping }
func (h host) Settings() wire.Settings                        { return h.Config }
func (h host) RequestContext(*fasthttp.RequestCtx) (context.Context, func()) {
	return context.WithCancel(context.Background())
}

var t0 = time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC)

// oneModel is a generation model with two lanes, one decoding a Chat
// request, and Background requests queued; and an embedding model.
func oneModel(t *testing.T) (*fakeSched, *fakeCache, []wire.LoadedEntry) {
	m := tasktest.FakeModel(t, false)
	m.Desc.Architecture, m.Desc.KVBytesPerToken, m.Desc.ModelBytes, m.Desc.Identity = "llama", 1000, 5_000_000, "abc123"
	fs := &fakeSched{lanes: 2}
	fs.snap = sched.Snapshot{PrefillTokens: 400, DecodeTokens: 90, Preemptions: 3}
	fs.occ.Lanes = []sched.LaneView{{
		ID: 7, Class: sched.Chat, API: "openai", Seq: 1, PromptTokens: 40, ToPrefill: 40, Prefilled: 40, CachedTokens: 16, Generated: 11,
		Submitted: t0.Add(-3 * time.Second), Admitted: t0.Add(-3 * time.Second), FirstToken: t0.Add(-2 * time.Second),
	}}
	fs.occ.Queues[sched.Background] = sched.QueueView{Waiting: 3, Oldest: t0.Add(-1500 * time.Millisecond)}
	m.Sched = fs
	fc := &fakeCache{view: []kv.Entry{{Tier: "resident", Tokens: 56}, {Tier: "host", Tokens: 20, Bytes: 777}, {Tier: "parked", Tokens: 30, Bytes: 99}, {Tier: "parked", Tokens: 5, Bytes: 1}}}
	fc.stats.Hits.Store(6)
	fc.stats.Misses.Store(2)
	fc.stats.HostHits.Store(1)
	fc.stats.ParkHits.Store(2)
	emb := &task.Model{Name: "embed", Desc: m.Desc}
	return fs, fc, []wire.LoadedEntry{
		{Model: m, Size: 6_000_000, ExpiresAt: t0.Add(time.Minute), InFlight: 1, PrefixCache: fc},
		{Model: emb, Size: 100, Pinned: true},
	}
}

func TestCollect(t *testing.T) {
	_, _, loaded := oneModel(t)
	st := collect(wire.Settings{Version: "v9", Started: t0.Add(-time.Hour)}, loaded, t0, status.Throughput{IntervalSeconds: 2})
	if st.Version != "v9" || st.UptimeSeconds != 3600 || st.Preemptions != 3 || len(st.Models) != 2 {
		t.Fatalf("status: %+v", st)
	}
	m := st.Models[0]
	if m.Name != "fake" || m.Arch != "llama" || m.Kind != "generation" || m.Digest != "abc123" || m.SizeBytes != 6_000_000 ||
		m.WeightsBytes != 5_000_000 || m.KVBytes != 512*1000 || m.Context != 512 || m.Lanes != 2 || m.LanesBusy != 1 ||
		m.InFlight != 1 || m.ExpiresAt == nil || !m.ExpiresAt.Equal(t0.Add(time.Minute)) || m.PromptTokens != 400 || m.GeneratedTokens != 90 {
		t.Fatalf("model: %+v", m)
	}
	c := m.Cache
	if c == nil || c.Hits != 6 || c.Misses != 2 || c.HitRate != 0.75 ||
		c.Resident != (status.Tier{Entries: 1, Tokens: 56, Bytes: 56_000, Hits: 3}) ||
		c.Host != (status.Tier{Entries: 1, Tokens: 20, Bytes: 777, Hits: 1}) ||
		c.Parked != (status.Tier{Entries: 2, Tokens: 35, Bytes: 100, Hits: 2}) {
		t.Fatalf("cache: %+v", c)
	}
	if e := st.Models[1]; e.Kind != "embedding" || e.Lanes != 0 || e.Cache != nil || !e.Pinned || e.ExpiresAt != nil {
		t.Fatalf("embedding model: %+v", e)
	}
	want := []status.Lane{
		{Model: "fake", Index: 0, Phase: "decode", ID: 7, Class: "chat", API: "openai", PromptTokens: 40, PrefilledTokens: 40,
			CachedTokens: 16, GeneratedTokens: 11, TokensPerSecond: 5, AgeMS: 3000},
		{Model: "fake", Index: 1, Phase: "idle"},
	}
	if len(st.Lanes) != 2 || st.Lanes[0] != want[0] || st.Lanes[1] != want[1] {
		t.Fatalf("lanes:\n got %+v\nwant %+v", st.Lanes, want)
	}
	if len(st.Queues) != sched.NumClasses {
		t.Fatalf("queues: %+v", st.Queues)
	}
	for _, q := range st.Queues {
		switch q.Class {
		case sched.Background.String():
			if q.Waiting != 3 || q.OldestWaitMS != 1500 {
				t.Errorf("background queue: %+v", q)
			}
		default:
			if q.Waiting != 0 || q.OldestWaitMS != 0 {
				t.Errorf("%s queue: %+v", q.Class, q)
			}
		}
	}
	if busy, total := st.BusyLanes(""); busy != 1 || total != 2 {
		t.Errorf("busy lanes %d/%d", busy, total)
	}
}

// Lanes sit at their slots, idle ones between; a lane still prefilling
// or restoring says so; one that has not produced a second token has no
// rate yet.
func TestCollectPhases(t *testing.T) {
	lanes := lanesOf("m", 4, []sched.LaneView{
		{ID: 1, Slot: 3, ToPrefill: 100, Prefilled: 30, Submitted: t0},
		{ID: 2, Slot: 0, ToPrefill: 100, Restoring: true},
		{ID: 3, Slot: 1, ToPrefill: 10, Prefilled: 10, Generated: 1, FirstToken: t0.Add(-time.Second)},
	}, t0)
	if len(lanes) != 4 || lanes[3].Phase != "prefill" || lanes[0].Phase != "restore" || lanes[1].Phase != "decode" || lanes[1].TokensPerSecond != 0 ||
		lanes[2].Phase != "idle" || lanes[2].Index != 2 || lanes[3].ID != 1 || lanes[3].Index != 3 {
		t.Fatalf("%+v", lanes)
	}
}

func newAPI(t *testing.T, loaded func() []wire.LoadedEntry) (*api, context.CancelFunc) {
	stopping, stop := context.WithCancel(context.Background())
	h := host{Host: wiretest.Host{Config: wire.Settings{Version: "test", Started: time.Now()}}, loaded: loaded, stopping: stopping}
	a := &api{h: h, ring: &throughputRing{}}
	t.Cleanup(stop)
	return a, stop
}

func TestStatusRoute(t *testing.T) {
	_, _, loaded := oneModel(t)
	a, _ := newAPI(t, func() []wire.LoadedEntry { return loaded })
	ctx := tasktest.RequestCtx(nil)
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/v1/status")
	if err := a.status(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if ct := string(ctx.Response.Header.ContentType()); ct != "application/json" {
		t.Fatalf("content type %q", ct)
	}
	var st status.Status
	if err := json.Unmarshal(ctx.Response.Body(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Version != "test" || len(st.Models) != 2 || len(st.Lanes) != 2 || st.Lanes[0].ID != 7 || st.Lanes[0].Phase != "decode" || st.Throughput.IntervalSeconds != 2 {
		t.Fatalf("%s", ctx.Response.Body())
	}
	// The names the page and the CLI read.
	for _, key := range []string{`"uptime_s"`, `"lanes_busy"`, `"kv_bytes"`, `"expires_at"`, `"prefilled_tokens"`, `"oldest_wait_ms"`, `"hit_rate"`, `"parked"`, `"samples"`} {
		if !strings.Contains(string(ctx.Response.Body()), key) {
			t.Errorf("no %s in %s", key, ctx.Response.Body())
		}
	}
}

// A query parameter is refused by name on both routes: they take none.
func TestStatusRefusesQuery(t *testing.T) {
	a, _ := newAPI(t, func() []wire.LoadedEntry { return nil })
	for _, h := range []wire.Handler{a.status, a.events} {
		ctx := tasktest.RequestCtx(nil)
		ctx.Request.SetRequestURI("/v1/status?zeta=1&model=x")
		err := h(ctx, nil)
		var we *wire.Error
		if !errors.As(err, &we) || we.Status != 400 || we.Param != "model" {
			t.Fatalf("got %v", err)
		}
	}
}

// The stream sends at once, again when a lane changes, and ends when the
// client goes or the server stops.
func TestFollow(t *testing.T) {
	fs, _, loaded := oneModel(t)
	a, stop := newAPI(t, func() []wire.LoadedEntry { return loaded })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sent []status.Status
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.follow(ctx, a.h.Stopping(), func() status.Status { return a.current(nil) }, func(event string, v any) error {
			if event != "status" {
				t.Errorf("event %q", event)
			}
			st := v.(status.Status)
			sent = append(sent, st)
			switch len(sent) {
			case 1:
				if st.Lanes[0].Phase != "decode" {
					t.Errorf("first: %+v", st.Lanes)
				}
				fs.set(func(f *fakeSched) { f.occ.Lanes = nil })
			case 2:
				if st.Lanes[0].Phase != "idle" {
					t.Errorf("after the lane ended: %+v", st.Lanes)
				}
				stop()
			}
			return nil
		})
	}()
	<-done
	if len(sent) != 2 {
		t.Fatalf("%d events before the server stopped", len(sent))
	}
	// A failed send (the client went) ends it too.
	stopping, stop2 := context.WithCancel(context.Background())
	defer stop2()
	n := 0
	a.follow(context.Background(), stopping, func() status.Status { return a.current(nil) }, func(string, any) error { n++; return errors.New("gone") })
	if n != 1 {
		t.Fatalf("%d sends after a failed one", n)
	}
}

// The ring turns the schedulers' counters into rates, drops a model that
// unloaded, and keeps RingLength samples.
func TestThroughputRing(t *testing.T) {
	fs, _, loaded := oneModel(t)
	var r throughputRing
	r.sample(loaded, t0)
	if got := r.snapshot().Samples; len(got) != 0 {
		t.Fatalf("first sample only takes the counters in: %+v", got)
	}
	fs.set(func(f *fakeSched) { f.snap.PrefillTokens += 100; f.snap.DecodeTokens += 40 })
	r.sample(loaded, t0.Add(2*time.Second))
	got := r.snapshot()
	if got.IntervalSeconds != SampleEvery.Seconds() || len(got.Samples) != 1 ||
		got.Samples[0] != (status.Sample{At: t0.Add(2 * time.Second), PromptPerSecond: 50, GeneratedPerSecond: 20}) {
		t.Fatalf("%+v", got)
	}
	r.sample(nil, t0.Add(4*time.Second)) // unloaded
	fs.set(func(f *fakeSched) { f.snap.DecodeTokens = 10 })
	r.sample(loaded, t0.Add(6*time.Second)) // loaded again, counting afresh
	got = r.snapshot()
	if s := got.Samples[len(got.Samples)-1]; s.PromptPerSecond != 0 || s.GeneratedPerSecond != 0 {
		t.Fatalf("a reloaded model's counters are not a rate: %+v", s)
	}
	for i := range RingLength + 10 {
		r.sample(loaded, t0.Add(time.Duration(8+2*i)*time.Second))
	}
	if got := r.snapshot().Samples; len(got) != RingLength || !got[len(got)-1].At.Equal(t0.Add(time.Duration(8+2*(RingLength+9))*time.Second)) {
		t.Fatalf("%d samples, last %v", len(got), got[len(got)-1].At)
	}
}

// The sampler stops with the server.
func TestSamplerStops(t *testing.T) {
	stopping, stop := context.WithCancel(context.Background())
	h := host{loaded: func() []wire.LoadedEntry { return nil }, stopping: stopping}
	var r throughputRing
	done := make(chan struct{})
	go func() { r.run(stopping, h, time.Hour); close(done) }()
	stop()
	<-done
}
