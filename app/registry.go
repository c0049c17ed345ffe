package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"superfluid/gguf"
	sfhttp "superfluid/http"
	"superfluid/panics"
	"superfluid/pull"
	"superfluid/sched"
)

// Registry is the models one process serves: the resident ones (--model,
// --fim-model), loaded at start, and any model of the models directory,
// loaded when a request names it. It implements sfhttp.Models.
//
// One mutex guards the table of slots; loads and unloads run outside it,
// marked on their slot (loading, closing) so that everyone else waits for
// them instead of starting a second one. The decisions — what to unload
// for room, what has expired — are modelPolicy's pure functions.
type Registry struct {
	o           Options        // every model's engine, cache and scheduler settings
	arb         *sched.Arbiter // one per process: whose engine steps next
	modelsDir   string
	maxModels   int
	budget      int64 // bytes; ≤ 0: no bound
	defaultKeep time.Duration
	defName     string
	fimName     string
	now         func() time.Time

	mu sync.Mutex
	// pressure is the machine's memory pressure (SetPressure), which a
	// model loaded starts at.
	pressure sched.Pressure
	slots    map[string]*slot // by name
	closed   bool
	loads    sync.WaitGroup // load and unload goroutines
	wake     chan struct{}  // nudges the reaper: an expiry changed
	stop     chan struct{}
	reaping  bool          // the reaper runs
	reaped   chan struct{} // closed when the reaper returns
	digest   map[string]fileDigest
	loadsOf  map[string]int         // loads started, by model name, since start
	lookups  map[string]*diskLookup // disk reads under way for Acquire, by what they read

	// onLoad, when set, runs with each model loaded on demand before it
	// serves (the cache pins recorded for it are restored). Set before
	// the registry serves requests.
	onLoad func(m *sfhttp.Model)

	// beforeDisk, when set, runs before each of Acquire's disk reads with
	// its key; tests hold one there. nil in service.
	beforeDisk func(key string)
	// openStack loads a model: openModelStack, or a test's stand-in.
	openStack func(spec ModelSpec, o Options, arb *sched.Arbiter) (*modelStack, error)
}

// slot is one model the registry knows, loaded or not.
type slot struct {
	spec     ModelSpec
	resident bool
	pinned   bool
	st       *modelStack // nil while not loaded
	load     *loadOp     // non-nil while loading
	closing  chan struct{}
	inflight int
	lastUsed time.Time
	expires  time.Time // zero: never
	size     int64     // measured when it was last loaded; estimated before
}

// loadOp is one load that everyone asking for the model meanwhile waits
// for; err is set before done closes.
type loadOp struct {
	done chan struct{}
	err  error
}

type fileDigest struct {
	mod    time.Time
	size   int64
	digest string
}

// newRegistry returns a registry of o's resident models, none loaded yet.
func newRegistry(o Options) (*Registry, error) {
	r := &Registry{
		o: o, arb: sched.NewArbiter(sched.ArbiterConfig{}), modelsDir: o.ModelsDir, budget: o.MemoryBudget, defaultKeep: o.KeepAlive, now: time.Now,
		slots: map[string]*slot{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), reaped: make(chan struct{}),
		digest: map[string]fileDigest{}, loadsOf: map[string]int{}, lookups: map[string]*diskLookup{},
		openStack: openModelStack,
	}
	specs := append([]ModelSpec{{Path: o.ModelPath, Alias: o.Alias, LoRA: o.LoRA, MMProj: o.MMProj}}, o.Models...)
	if o.FIMModelPath != "" {
		specs = append(specs, ModelSpec{Path: o.FIMModelPath})
	}
	for i, sp := range specs {
		sp.Alias = cmp.Or(sp.Alias, nameOfFile(sp.Path))
		if o.FIMModelPath != "" && i == len(specs)-1 {
			for name, sl := range r.slots { // the FIM model is also a --model
				if sl.spec.Path == sp.Path {
					sp.Alias = name
				}
			}
		}
		if sl := r.findLocked(sp.Alias); sl != nil {
			if sl.spec.Path != sp.Path {
				return nil, fmt.Errorf("app: two models are called %q (%s and %s); give one an alias", sp.Alias, sl.spec.Path, sp.Path)
			}
		} else {
			r.slots[sp.Alias] = &slot{spec: sp, resident: true, pinned: true}
		}
		if i == 0 {
			r.defName = sp.Alias
		}
		if o.FIMModelPath != "" && i == len(specs)-1 {
			r.fimName = sp.Alias
		}
	}
	r.maxModels = max(o.MaxModels, len(r.slots))
	if o.MaxModels <= 0 {
		r.maxModels = max(3, len(r.slots))
	}
	return r, nil
}

func nameOfFile(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// loadResident loads every resident model, the default first, and starts
// the reaper. Residents load whatever the budget (the operator named
// them); a budget they exceed is logged.
func (r *Registry) loadResident() error {
	names := []string{r.defName}
	for name, sl := range r.slots {
		if sl.resident && name != r.defName {
			names = append(names, name)
		}
	}
	slices.Sort(names[1:])
	var total int64
	for _, name := range names {
		sl := r.slots[name]
		st, err := openModelStack(sl.spec, r.o, r.arb)
		if err != nil {
			return fmt.Errorf("model %s: %w", name, err)
		}
		r.mu.Lock()
		sl.st, sl.size, sl.lastUsed = st, st.Size, r.now()
		st.setPressure(r.pressure)
		r.mu.Unlock()
		total += st.Size
	}
	if r.budget > 0 && total > r.budget {
		slog.Warn("the resident models hold more than the memory budget; no model can be loaded on demand",
			"resident_bytes", total, "budget", r.budget)
	}
	r.mu.Lock()
	r.reaping = true
	r.mu.Unlock()
	go r.reap()
	return nil
}

// defaultStack is the default model's stack, nil when it is not loaded.
func (r *Registry) defaultStack() *modelStack {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.slots[r.defName].st
}

// Loads is how many times the model called name was loaded on demand
// (resident models' loads at start are not counted).
func (r *Registry) Loads(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.loadsOf[name]
}

// FIMName is the FIM model's name, "" when there is none.
func (r *Registry) FIMName() string { return r.fimName }

// Acquire returns the model want names, loading it when it is not loaded
// (every concurrent request for it waits for the same load). The lock
// covers only the table: listing the models directory and reading a
// model's header happen with it released (lookUpLocked), so a request
// naming a model on a slow disk holds up no other request's look-up.
func (r *Registry) Acquire(ctx context.Context, want sfhttp.ModelWant) (*sfhttp.Model, func(), error) {
	name := want.Name
	if want.FIM && r.fimName != "" {
		name = r.fimName
	}
	name = cmp.Or(name, r.defName)
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if r.closed {
			return nil, nil, errors.New("the server is shutting down")
		}
		// Looked up again after every wait: an unloaded on-demand model's
		// slot goes, and its file may have gone with it.
		sl := r.findLocked(name)
		if sl == nil && r.modelsDir != "" && name != "" {
			op, err := r.lookUpLocked(ctx, "dir\x00"+name, func(op *diskLookup) { op.entry, op.err = r.dirEntry(name) })
			if err != nil {
				return nil, nil, err
			}
			if sl = r.findLocked(name); sl == nil && op.entry != nil { // the table may have changed meanwhile
				sl = r.adoptLocked(*op.entry)
			}
		}
		if sl == nil {
			return nil, nil, fmt.Errorf("%w: %q", sfhttp.ErrModelNotFound, name)
		}
		switch {
		case sl.st != nil:
			sl.inflight++
			sl.lastUsed = r.now()
			var once sync.Once
			return sl.st.Model, func() { once.Do(func() { r.release(sl, want) }) }, nil
		case sl.load != nil:
			op := sl.load
			if err := r.waitUnlocked(ctx, op.done); err != nil {
				return nil, nil, err
			}
			if op.err != nil {
				return nil, nil, op.err
			}
		case sl.closing != nil:
			if err := r.waitUnlocked(ctx, sl.closing); err != nil {
				return nil, nil, err
			}
		case sl.size == 0: // never loaded: its size is estimated from its header, then the loop decides again
			path := sl.spec.Path
			op, err := r.lookUpLocked(ctx, "size\x00"+path, func(op *diskLookup) { op.size, op.err = estimatedSize(path, r.o) })
			if err != nil {
				return nil, nil, fmt.Errorf("model %q: %w", sl.spec.Alias, err)
			}
			if sl.size == 0 {
				sl.size = op.size
			}
		default:
			if err := r.startLoadLocked(sl); err != nil {
				return nil, nil, err
			}
		}
	}
}

// diskLookup is one read of the disk that everyone asking the same
// meanwhile waits for: a models directory entry by name, or a file's
// estimated size. Its fields are set before done closes.
type diskLookup struct {
	done  chan struct{}
	entry *pull.Entry
	size  int64
	err   error
}

// lookUpLocked runs look with the lock released, once at a time per key:
// a caller arriving while one runs waits for its answer (or leaves with
// its context). The error is the wait's or the look-up's; the lock is
// held again when it returns.
func (r *Registry) lookUpLocked(ctx context.Context, key string, look func(op *diskLookup)) (*diskLookup, error) {
	if op := r.lookups[key]; op != nil {
		if err := r.waitUnlocked(ctx, op.done); err != nil {
			return nil, err
		}
		return op, op.err
	}
	op := &diskLookup{done: make(chan struct{})}
	r.lookups[key] = op
	r.mu.Unlock()
	func() {
		defer func() { // a panic reading a file fails this look-up alone, and the lock is taken back
			if v := recover(); v != nil {
				op.err = panics.Recovered(panics.ModelLoader, v, "reading", key)
			}
		}()
		if h := r.beforeDisk; h != nil {
			h(key)
		}
		look(op)
	}()
	r.mu.Lock()
	delete(r.lookups, key)
	close(op.done)
	return op, op.err
}

// waitUnlocked waits for ch with the registry's lock released.
func (r *Registry) waitUnlocked(ctx context.Context, ch <-chan struct{}) error {
	r.mu.Unlock()
	defer r.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the model to load: %w", ctx.Err())
	}
}

// findLocked is the slot a request's name asks for (Ollama's ":latest"
// tolerated), nil when no known model is called that.
func (r *Registry) findLocked(name string) *slot {
	if sl, ok := r.slots[name]; ok {
		return sl
	}
	for n, sl := range r.slots {
		if sfhttp.SameModelName(name, n) {
			return sl
		}
	}
	return nil
}

// dirEntry is the models directory's model of that name (its file name
// without .gguf, or the reference it was pulled from); nil when there is
// none. Only files the directory lists are candidates: a request cannot
// name a path. It reads the disk: call it without the lock.
func (r *Registry) dirEntry(name string) (*pull.Entry, error) {
	ents, err := pull.List(r.modelsDir)
	if err != nil {
		slog.Warn("listing the models directory", "dir", r.modelsDir, "err", err)
		return nil, nil // served as "not found", as before: the directory may come back
	}
	for _, e := range ents {
		if sfhttp.SameModelName(name, e.Name) || e.Ref != "" && name == e.Ref {
			return &e, nil
		}
	}
	return nil, nil
}

// adoptLocked is the slot for a models directory entry: a resident model
// of that name or file, else a new on-demand slot.
func (r *Registry) adoptLocked(e pull.Entry) *slot {
	if sl := r.slots[e.Name]; sl != nil { // a resident model of that name
		return sl
	}
	for _, sl := range r.slots { // a resident model of that file, under its alias
		if sl.spec.Path == e.Path {
			return sl
		}
	}
	sl := &slot{spec: ModelSpec{Path: e.Path, Alias: e.Name}}
	r.slots[e.Name] = sl
	return sl
}

// viewsLocked is the policy's picture of the loaded and loading models.
func (r *Registry) viewsLocked() []modelView {
	var vs []modelView
	for name, sl := range r.slots {
		if sl.st == nil && sl.load == nil {
			continue
		}
		vs = append(vs, modelView{Name: name, Busy: sl.inflight > 0 || sl.load != nil, Pinned: sl.pinned,
			LastUsed: sl.lastUsed, Expires: sl.expires, Size: sl.size})
	}
	return vs
}

// startLoadLocked makes room for sl (unloading what roomFor picks) and
// starts loading it; the caller then waits on sl.load. sl.size is known
// (measured, or estimated by Acquire): nothing here reads the disk.
func (r *Registry) startLoadLocked(sl *slot) error {
	need := sl.size
	victims, err := roomFor(r.viewsLocked(), sl.spec.Alias, need, r.maxModels, r.budget)
	if err != nil {
		return err
	}
	var gone []chan struct{}
	for _, v := range victims {
		slog.Info("unloading the least recently used model to make room", "model", v, "for", sl.spec.Alias)
		gone = append(gone, r.unloadLocked(r.slots[v]))
	}
	op := &loadOp{done: make(chan struct{})}
	sl.load, sl.size = op, need
	r.loadsOf[sl.spec.Alias]++
	r.loads.Add(1)
	go r.runLoad(sl, op, gone)
	return nil
}

// runLoad waits for the models unloaded to make room, then loads sl.
func (r *Registry) runLoad(sl *slot, op *loadOp, gone []chan struct{}) {
	defer r.loads.Done()
	for _, ch := range gone {
		<-ch
	}
	st, err := r.openSafely(sl.spec)
	if err == nil && r.onLoad != nil {
		r.onLoad(st.Model)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	sl.load = nil
	if err != nil {
		op.err = fmt.Errorf("loading model %q: %w", sl.spec.Alias, err)
		slog.Error("loading a model", "model", sl.spec.Alias, "err", err)
		if !sl.resident {
			delete(r.slots, sl.spec.Alias)
		}
	} else {
		sl.st, sl.size, sl.lastUsed = st, st.Size, r.now()
		st.setPressure(r.pressure)
		// A resident model a keep_alive unloaded is resident again once
		// reloaded; one loaded on demand has the default keep-alive.
		sl.expires, sl.pinned = keepAliveAfter(r.now(), sfhttp.ModelWant{}, sl.resident, sl.resident, r.defaultKeep)
		if r.closed { // Close is waiting for this load: it unloads nothing it did not see
			sl.st = nil
			r.loads.Add(1)
			go func() { defer r.loads.Done(); r.closeStack(sl.spec.Alias, st) }()
		}
	}
	close(op.done)
	r.nudge()
}

// openSafely loads a model on a load goroutine. A panic loading it (a
// file no check caught) fails this load alone: every request waiting for
// it gets the error, and the registry goes on serving the other models.
func (r *Registry) openSafely(spec ModelSpec) (st *modelStack, err error) {
	defer func() {
		if v := recover(); v != nil {
			st, err = nil, panics.Recovered(panics.ModelLoader, v, "model", spec.Alias, "path", spec.Path)
		}
	}()
	return r.openStack(spec, r.o, r.arb)
}

// unloadLocked takes sl's stack away and closes it (parking its cache)
// on another goroutine; the channel closes when it is done.
func (r *Registry) unloadLocked(sl *slot) chan struct{} {
	st := sl.st
	sl.st, sl.closing = nil, make(chan struct{})
	done := sl.closing
	r.loads.Add(1)
	go func() {
		defer r.loads.Done()
		r.closeStack(sl.spec.Alias, st)
		r.mu.Lock()
		sl.closing = nil
		if !sl.resident && sl.st == nil && sl.load == nil && r.slots[sl.spec.Alias] == sl {
			delete(r.slots, sl.spec.Alias) // the directory is listed again when it is next asked for
		}
		r.mu.Unlock()
		close(done)
	}()
	return done
}

func (r *Registry) closeStack(name string, st *modelStack) {
	if err := st.close(); err != nil {
		slog.Warn("unloading a model", "model", name, "err", err)
		return
	}
	slog.Info("model unloaded", "model", name)
}

// Resident reports whether name is a model the server was started with
// (--model, --fim-model), which the models directory must not delete.
func (r *Registry) Resident(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sl := r.findLocked(name)
	return sl != nil && sl.resident
}

// Unload unloads the model called name (its cache parked) and waits for
// it; a model serving requests is unloaded as soon as the last one ends,
// and Unload then returns at once. Unknown or not loaded: nothing to do.
// The models directory's delete calls it before removing a file.
func (r *Registry) Unload(name string) error {
	r.mu.Lock()
	sl := r.findLocked(name)
	if sl == nil || sl.st == nil {
		var closing chan struct{}
		if sl != nil {
			closing = sl.closing
		}
		r.mu.Unlock()
		if closing != nil {
			<-closing
		}
		return nil
	}
	sl.pinned, sl.expires = false, r.now()
	if sl.inflight > 0 {
		r.nudge() // the reaper unloads it once idle
		r.mu.Unlock()
		return nil
	}
	done := r.unloadLocked(sl)
	r.mu.Unlock()
	<-done
	return nil
}

// release ends one request's hold on sl and applies its keep-alive.
func (r *Registry) release(sl *slot, want sfhttp.ModelWant) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sl.inflight--
	now := r.now()
	sl.lastUsed = now
	sl.expires, sl.pinned = keepAliveAfter(now, want, sl.resident, sl.pinned, r.defaultKeep)
	r.nudge()
}

func (r *Registry) nudge() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// reap unloads models whose keep-alive ran out, waking at the next expiry
// or when one changes.
func (r *Registry) reap() {
	defer close(r.reaped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		r.mu.Lock()
		due, next := expiredModels(r.viewsLocked(), r.now())
		for _, name := range due {
			slog.Info("unloading a model whose keep-alive ran out", "model", name)
			r.unloadLocked(r.slots[name])
		}
		r.mu.Unlock()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-r.stop:
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// Close unloads every model (parking their caches) once the loads and
// unloads under way are done. No request may be running.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.stop)
	var errs []error
	var stacks []*modelStack
	for _, sl := range r.slots {
		if sl.st != nil {
			stacks = append(stacks, sl.st)
			sl.st = nil
		}
	}
	r.mu.Unlock()
	for _, st := range stacks {
		if err := st.close(); err != nil {
			errs = append(errs, fmt.Errorf("model %s: %w", st.Model.Name, err))
		}
	}
	r.loads.Wait()
	r.mu.Lock()
	reaping := r.reaping
	r.mu.Unlock()
	if reaping {
		<-r.reaped
	}
	return errors.Join(errs...)
}

// Loaded lists the loaded models, the default first, then by name.
func (r *Registry) Loaded() []sfhttp.LoadedModel {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []sfhttp.LoadedModel
	for _, name := range r.namesLocked() {
		sl := r.slots[name]
		if sl.st == nil {
			continue
		}
		out = append(out, sfhttp.LoadedModel{Model: sl.st.Model, Size: sl.size, ExpiresAt: sl.expires, InFlight: sl.inflight, Pinned: sl.pinned})
	}
	return out
}

// namesLocked is every slot's name, the default first, then sorted.
func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.slots))
	for n := range r.slots {
		if n != r.defName {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return append([]string{r.defName}, names...)
}

// Available lists every model a request may name: the resident ones and
// those loaded, then the models directory's.
func (r *Registry) Available() []sfhttp.ModelInfo {
	ents, err := pull.List(r.modelsDir)
	if r.modelsDir == "" {
		ents, err = nil, nil
	}
	if err != nil {
		slog.Warn("listing the models directory", "dir", r.modelsDir, "err", err)
	}
	r.mu.Lock()
	var out []sfhttp.ModelInfo
	seen := map[string]bool{}
	var known []string // paths listed already
	for _, name := range r.namesLocked() {
		sl := r.slots[name]
		mi := sfhttp.ModelInfo{Name: name, Path: sl.spec.Path}
		if sl.st != nil {
			mi.Loaded = sl.st.Model
			mi.Digest = sl.st.Model.Desc.Identity
		}
		out = append(out, mi)
		seen[name] = true
		known = append(known, sl.spec.Path)
	}
	r.mu.Unlock()
	for _, e := range ents {
		// A resident model's file in the directory is listed once, under
		// the name it is served by.
		if !seen[e.Name] && !slices.ContainsFunc(known, func(p string) bool { return sameFile(p, e.Path) }) {
			out = append(out, sfhttp.ModelInfo{Name: e.Name, Path: e.Path, Digest: e.SHA256}) // a pulled file's sha256, as Ollama's
		}
	}
	for i := range out {
		r.describeFile(&out[i])
	}
	return out
}

// describeFile fills in what the file says of a listed model: its size,
// modification time and, for one not loaded, its digest (remembered per
// file version, as a listing reads every model's header).
func (r *Registry) describeFile(mi *sfhttp.ModelInfo) {
	fi, err := os.Stat(mi.Path)
	if err != nil {
		return
	}
	mi.Size, mi.Modified = fi.Size(), fi.ModTime()
	if mi.Digest != "" {
		return
	}
	r.mu.Lock()
	d, ok := r.digest[mi.Path]
	r.mu.Unlock()
	if ok && d.mod.Equal(mi.Modified) && d.size == mi.Size {
		mi.Digest = d.digest
		return
	}
	dg, err := gguf.ModelDigest(mi.Path)
	if err != nil {
		return
	}
	mi.Digest = dg
	r.mu.Lock()
	r.digest[mi.Path] = fileDigest{mod: mi.Modified, size: mi.Size, digest: dg}
	r.mu.Unlock()
}
