package app

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"superfluid/gguf"
	sfhttp "superfluid/http"
	"superfluid/panics"
	"superfluid/sched"
	"superfluid/synth"
)

// tinyModels writes the tiny synthetic model under each name (distinct
// seeds) into dir and returns their paths.
func tinyModels(t *testing.T, dir string, names ...string) []string {
	t.Helper()
	s, err := synth.ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i, n := range names {
		p := filepath.Join(dir, n+".gguf")
		if err := synth.Write(p, synth.Options{Shape: s, Type: "f16", Seed: uint64(31 + i)}); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func testRegistry(t *testing.T, o Options) *Registry {
	t.Helper()
	o.Lanes, o.Ctx, o.Threads, o.HostCache, o.MemoryBudget = 1, 512, 1, -1, -1
	o.withDefaults()
	r, err := newRegistry(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.loadResident(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Error(err)
		}
	})
	return r
}

func loadedNames(r *Registry) []string {
	var names []string
	for _, lm := range r.Loaded() {
		names = append(names, lm.Model.Name)
	}
	return names
}

// waitLoaded waits (boundedly) for the loaded models to be want: unloads
// run on their own goroutine.
func waitLoaded(t *testing.T, r *Registry, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Equal(loadedNames(r), want) {
		if time.Now().After(deadline) {
			t.Fatalf("loaded %v, want %v", loadedNames(r), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A model with a request in flight is never unloaded: not by keep_alive
// 0, not to make room. It goes once its last request ends.
func TestRegistryNeverUnloadsAModelInUse(t *testing.T) {
	dir := t.TempDir()
	paths := tinyModels(t, dir, "alpha", "beta", "gamma")
	r := testRegistry(t, Options{ModelPath: paths[0], ModelsDir: dir, MaxModels: 2})
	ctx := context.Background()

	m1, rel1, err := r.Acquire(ctx, sfhttp.ModelWant{Name: "beta"})
	if err != nil || m1.Name != "beta" {
		t.Fatalf("beta: %v, %v", m1, err)
	}
	_, rel2, err := r.Acquire(ctx, sfhttp.ModelWant{Name: "beta:latest"})
	if err != nil {
		t.Fatal(err)
	}
	// gamma needs beta's place, which two requests hold.
	if _, _, err := r.Acquire(ctx, sfhttp.ModelWant{Name: "gamma"}); !errors.Is(err, sfhttp.ErrModelNoRoom) {
		t.Fatalf("gamma while beta is busy: %v, want ErrModelNoRoom", err)
	}
	rel1() // keep_alive unset: beta stays, one request still holds it
	rel1() // a second call of the same release changes nothing
	waitLoaded(t, r, "alpha", "beta")
	rel2Want := sfhttp.ModelWant{Name: "beta", HasKeepAlive: true}
	_, rel3, err := r.Acquire(ctx, rel2Want)
	if err != nil {
		t.Fatal(err)
	}
	rel3() // keep_alive 0, but rel2's request is still running
	time.Sleep(50 * time.Millisecond)
	if !slices.Equal(loadedNames(r), []string{"alpha", "beta"}) {
		t.Fatalf("beta unloaded under a running request: %v", loadedNames(r))
	}
	rel2()
	waitLoaded(t, r, "alpha", "beta") // rel2 set no keep_alive: the default 5m
	_, rel4, err := r.Acquire(ctx, rel2Want)
	if err != nil {
		t.Fatal(err)
	}
	rel4()
	waitLoaded(t, r, "alpha")

	// Now gamma fits, and the unknown stays unknown.
	_, rel5, err := r.Acquire(ctx, sfhttp.ModelWant{Name: "gamma"})
	if err != nil {
		t.Fatal(err)
	}
	rel5()
	if _, _, err := r.Acquire(ctx, sfhttp.ModelWant{Name: "../alpha"}); !errors.Is(err, sfhttp.ErrModelNotFound) {
		t.Fatalf("../alpha: %v", err)
	}
	if nb, ng := r.Loads("beta"), r.Loads("gamma"); nb != 1 || ng != 1 {
		t.Errorf("loads: beta %d, gamma %d; want one each (a refused load is none)", nb, ng)
	}
}

// A request waiting for a load gives up with its context; the load goes on
// for whoever asks next.
func TestRegistryWaitEndsWithTheContext(t *testing.T) {
	dir := t.TempDir()
	paths := tinyModels(t, dir, "alpha", "beta")
	r := testRegistry(t, Options{ModelPath: paths[0], ModelsDir: dir})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := r.Acquire(ctx, sfhttp.ModelWant{Name: "beta"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	m, rel, err := r.Acquire(context.Background(), sfhttp.ModelWant{Name: "beta"})
	if err != nil || m.Name != "beta" {
		t.Fatalf("beta: %v %v", m, err)
	}
	rel()
	if n := r.Loads("beta"); n != 1 {
		t.Errorf("beta loaded %d times, want once", n)
	}
}

// Unload takes a model out at once and waits; the next request loads it.
func TestRegistryUnload(t *testing.T) {
	dir := t.TempDir()
	paths := tinyModels(t, dir, "alpha", "beta")
	r := testRegistry(t, Options{ModelPath: paths[0], ModelsDir: dir})
	_, rel, err := r.Acquire(context.Background(), sfhttp.ModelWant{Name: "beta"})
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if err := r.Unload("beta"); err != nil || !slices.Equal(loadedNames(r), []string{"alpha"}) {
		t.Fatalf("after Unload(beta): %v, loaded %v", err, loadedNames(r))
	}
	if err := r.Unload("alpha"); err != nil || len(loadedNames(r)) != 0 {
		t.Fatalf("after Unload(alpha): %v, loaded %v", err, loadedNames(r))
	}
	if err := r.Unload("nope"); err != nil {
		t.Fatal(err)
	}
	m, rel, err := r.Acquire(context.Background(), sfhttp.ModelWant{})
	if err != nil || m.Name != "alpha" {
		t.Fatalf("the default after its unload: %v %v", m, err)
	}
	rel()
}

// The estimate a first load is decided on is close to what the loaded
// model then measures, for each KV cache type; the KV bytes per token the
// header gives are the loaded engine's exactly, and q8_0 cells take 34/64
// of f16's.
func TestEstimatedSizeMatchesMeasured(t *testing.T) {
	tiny := tinyModels(t, t.TempDir(), "alpha")[0]
	shape, err := synth.ShapeByName("small")
	if err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(t.TempDir(), "small.gguf")
	if err := synth.Write(small, synth.Options{Shape: shape, Type: "q8_0", Seed: 5}); err != nil {
		t.Fatal(err)
	}
	perToken := map[string]int64{}
	for _, c := range []struct{ path, typeK, typeV string }{{tiny, "f16", "f16"}, {small, "f16", "f16"}, {small, "q8_0", "q8_0"},
		{small, "q4_0", "q4_0"}, {small, "q8_0", "f16"}, {small, "bf16", "q5_1"}} {
		o := Options{ModelPath: c.path, Lanes: 1, Ctx: 2048, Threads: 1, HostCache: 1 << 20, CacheTypeK: c.typeK, CacheTypeV: c.typeV}
		o.withDefaults()
		kvType := c.typeK + "/" + c.typeV
		f, err := gguf.Open(c.path)
		if err != nil {
			t.Fatal(err)
		}
		estPerToken := estimatedKVBytesPerToken(f, c.typeK, c.typeV)
		est, err := estimatedSize(c.path, o)
		if err != nil {
			t.Fatal(err)
		}
		st, err := openModelStack(ModelSpec{Path: c.path, Alias: "m"}, o, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := st.Size
		desc := st.Engine.Descriptor()
		if err := st.close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s, kv %s: estimated %d bytes, measured %d; %d KV bytes per token", filepath.Base(c.path), kvType, est, got, desc.KVBytesPerToken)
		if diff := float64(est-got) / float64(got); diff < -0.1 || diff > 0.1 {
			t.Errorf("%s, kv %s: estimated %d bytes, measured %d (%.0f%% off)", filepath.Base(c.path), kvType, est, got, 100*diff)
		}
		if desc.CacheTypeK != c.typeK || desc.CacheTypeV != c.typeV || desc.KVBytesPerToken != estPerToken {
			t.Errorf("%s, kv %s: the engine holds %s/%s at %d bytes per token, the header says %d", filepath.Base(c.path), kvType,
				desc.CacheTypeK, desc.CacheTypeV, desc.KVBytesPerToken, estPerToken)
		}
		if c.path == small {
			perToken[kvType] = desc.KVBytesPerToken
		}
	}
	if f16, q8 := perToken["f16/f16"], perToken["q8_0/q8_0"]; q8*64 != f16*34 {
		t.Errorf("q8_0 cells take %d bytes per token, f16 %d: want 34/64 of it", q8, f16)
	}
}

// A request naming a model that is not loaded reads the disk (the models
// directory, the file's header) with the registry's lock released: held
// there, it stops no other request's look-up of a loaded model, nor the
// listings. A second request for the same model meanwhile waits for the
// same read instead of starting its own.
func TestRegistryDiskReadsHoldNoLock(t *testing.T) {
	dir := t.TempDir()
	paths := tinyModels(t, dir, "alpha", "beta")
	r := testRegistry(t, Options{ModelPath: paths[0], ModelsDir: dir})
	var mu sync.Mutex
	reads := map[string]int{}
	entered, release := make(chan string, 4), make(chan struct{})
	r.beforeDisk = func(key string) {
		mu.Lock()
		reads[key]++
		mu.Unlock()
		if strings.HasPrefix(key, "dir\x00beta") {
			entered <- key
			<-release
		}
	}
	type got struct {
		name string
		err  error
	}
	betas := make(chan got, 2)
	acquireBeta := func() {
		m, rel, err := r.Acquire(context.Background(), sfhttp.ModelWant{Name: "beta"})
		if err != nil {
			betas <- got{err: err}
			return
		}
		rel()
		betas <- got{name: m.Name}
	}
	go acquireBeta()
	<-entered // beta's look-up is now held on the disk
	go acquireBeta()

	done := make(chan error, 1)
	go func() {
		m, rel, err := r.Acquire(context.Background(), sfhttp.ModelWant{Name: "alpha"})
		if err == nil {
			rel()
			if m.Name != "alpha" {
				err = fmt.Errorf("got %s", m.Name)
			}
		}
		_ = r.Available()
		_ = r.Loaded()
		done <- err
	}()
	select { // a deadlock guard, not a timing: alpha needs no disk
	case err := <-done:
		if err != nil {
			t.Fatalf("alpha while beta's look-up is held: %v", err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("looking up a loaded model waited for another model's disk read")
	}
	close(release)
	for range 2 {
		if g := <-betas; g.err != nil || g.name != "beta" {
			t.Fatalf("beta: %+v", g)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if n := reads["dir\x00beta"]; n != 1 {
		t.Errorf("the models directory was listed %d times for beta, want once: %v", n, reads)
	}
	if n := r.Loads("beta"); n != 1 {
		t.Errorf("beta loaded %d times, want once", n)
	}
}

// A panic loading a model on demand fails that load alone: its requests
// get the error, the panic is counted, the loaded model goes on serving,
// and the next request for the model loads it afresh.
func TestRegistryLoadPanicFailsOnlyThatLoad(t *testing.T) {
	dir := t.TempDir()
	paths := tinyModels(t, dir, "alpha", "beta")
	r := testRegistry(t, Options{ModelPath: paths[0], ModelsDir: dir})
	var faulty atomic.Bool
	faulty.Store(true)
	r.openStack = func(spec ModelSpec, o Options, arb *sched.Arbiter) (*modelStack, error) {
		if faulty.Load() && spec.Alias == "beta" {
			panic("fault loading this file")
		}
		return openModelStack(spec, o, arb)
	}
	before := panics.Count(panics.ModelLoader)
	var pe *panics.Error
	if _, _, err := r.Acquire(context.Background(), sfhttp.ModelWant{Name: "beta"}); !errors.As(err, &pe) {
		t.Fatalf("beta whose load panics: %v", err)
	}
	if got := panics.Count(panics.ModelLoader) - before; got != 1 {
		t.Errorf("%d panics counted, want 1", got)
	}
	m, rel, err := r.Acquire(context.Background(), sfhttp.ModelWant{Name: "alpha"})
	if err != nil || m.Name != "alpha" {
		t.Fatalf("alpha after beta's load panicked: %v", err)
	}
	rel()
	faulty.Store(false)
	m, rel, err = r.Acquire(context.Background(), sfhttp.ModelWant{Name: "beta"})
	if err != nil || m.Name != "beta" {
		t.Fatalf("beta once its file loads: %v", err)
	}
	rel()
}
