package embed

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"superfluid/engine"
	"superfluid/sched"
)

// fakeEngine embeds an input as (first token, last token, length, sum),
// records each call's inputs, and holds a call while hold is set.
type fakeEngine struct {
	maxIn, maxTok int

	mu    sync.Mutex
	calls [][][]engine.Token
	hold  chan struct{} // when not nil, each call waits until it is closed
	fail  error
}

func (f *fakeEngine) EmbedLimits() (int, int) { return f.maxIn, f.maxTok }
func (f *fakeEngine) EmbedDim() int           { return 4 }

func (f *fakeEngine) Embed(inputs [][]engine.Token, dst []float32) ([]float32, error) {
	f.mu.Lock()
	f.calls = append(f.calls, slices.Clone(inputs))
	hold, fail := f.hold, f.fail
	f.mu.Unlock()
	if hold != nil {
		<-hold
	}
	if fail != nil {
		return dst, fail
	}
	for _, in := range inputs {
		sum := 0
		for _, t := range in {
			sum += int(t)
		}
		dst = append(dst, float32(in[0]), float32(in[len(in)-1]), float32(len(in)), float32(sum))
	}
	return dst, nil
}

func (f *fakeEngine) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

func want(in []engine.Token) []float32 {
	sum := 0
	for _, t := range in {
		sum += int(t)
	}
	return []float32{float32(in[0]), float32(in[len(in)-1]), float32(len(in)), float32(sum)}
}

func inputsOf(n, length int, base engine.Token) [][]engine.Token {
	out := make([][]engine.Token, n)
	for i := range out {
		for k := range length + i%3 {
			out[i] = append(out[i], base+engine.Token(i*7+k))
		}
	}
	return out
}

// start runs a runner until the test's cleanup-free stop is called.
func start(t *testing.T, f *fakeEngine, cfg Config) (*Runner, func()) {
	t.Helper()
	r, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	return r, func() { cancel(); <-done }
}

func TestPlanFillsByTokensAndInputsBestClassFirst(t *testing.T) {
	mk := func(c sched.Class, lens ...int) *job {
		j := &job{class: c}
		for _, n := range lens {
			j.inputs = append(j.inputs, make([]engine.Token, n))
		}
		return j
	}
	bg1, chat, bg2 := mk(sched.Background, 3, 3, 3), mk(sched.Chat, 5), mk(sched.Background, 1)
	q := []*job{bg1, chat, bg2}
	if c := plan(q, 8, 100); c.class != sched.Chat || len(c.parts) != 1 || c.parts[0].j != chat {
		t.Fatalf("chat waits: plan %+v", c)
	}
	chat.next = 1
	// Tokens bind: 3+3 fit 7, the third input does not; bg2 waits behind.
	c := plan(q, 8, 7)
	if c.class != sched.Background || len(c.parts) != 1 || c.parts[0] != (part{j: bg1, from: 0, to: 2}) || c.tokens != 6 {
		t.Fatalf("token-bound plan %+v", c)
	}
	// Inputs bind.
	if c := plan(q, 2, 100); c.inputs != 2 || len(c.parts) != 1 {
		t.Fatalf("input-bound plan %+v", c)
	}
	// Room for everything: both background jobs share the call, in order.
	c = plan(q, 8, 100)
	if len(c.parts) != 2 || c.parts[0].j != bg1 || c.parts[1].j != bg2 || c.inputs != 4 {
		t.Fatalf("shared plan %+v", c)
	}
	if got := c.batch(nil); len(got) != 4 {
		t.Fatalf("batch of %d", len(got))
	}
	bg1.next, bg2.next = 3, 1
	if c := plan(q, 8, 100); !c.empty {
		t.Fatalf("nothing left, plan %+v", c)
	}
}

// 64 inputs run in as few calls as the limits allow, and each input gets
// its own vector, in order.
func TestManyInputsRunInFewCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeEngine{maxIn: 16, maxTok: 1000}
		r, stop := start(t, f, Config{})
		defer stop()
		in := inputsOf(64, 5, 10)
		vecs, err := r.Embed(context.Background(), in, sched.Background)
		if err != nil {
			t.Fatal(err)
		}
		for i := range in {
			if !slices.Equal(vecs[i], want(in[i])) {
				t.Fatalf("input %d: %v, want %v", i, vecs[i], want(in[i]))
			}
		}
		if n := f.callCount(); n != 4 {
			t.Errorf("%d calls for 64 inputs at 16 a call", n)
		}
		st := r.Stats()
		if st.Calls.Load() != 4 || st.Inputs.Load() != 64 || st.Queued.Load() != 0 {
			t.Errorf("stats: calls %d inputs %d queued %d", st.Calls.Load(), st.Inputs.Load(), st.Queued.Load())
		}
	})
}

// Requests queued while a call runs share the next call.
func TestRequestsShareCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		f := &fakeEngine{maxIn: 64, maxTok: 10000, hold: hold}
		r, stop := start(t, f, Config{})
		defer stop()
		var wg sync.WaitGroup
		embed := func(in [][]engine.Token) {
			defer wg.Done()
			vecs, err := r.Embed(context.Background(), in, sched.Background)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range in {
				if !slices.Equal(vecs[i], want(in[i])) {
					t.Errorf("input %d: %v", i, vecs[i])
				}
			}
		}
		wg.Add(1)
		go embed(inputsOf(1, 4, 1))
		synctest.Wait() // the first call runs, held
		for i := range 5 {
			wg.Add(1)
			go embed(inputsOf(3, 4, engine.Token(100*i)))
		}
		synctest.Wait()
		f.mu.Lock()
		f.hold = nil
		f.mu.Unlock()
		close(hold)
		wg.Wait()
		if n := f.callCount(); n != 2 {
			t.Errorf("%d calls: the five requests queued behind the first should share one", n)
		}
	})
}

// A client gone before its inputs ran drops them: they never reach the
// engine, and the queue's count comes back.
func TestCancelledRequestsDropTheirInputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		f := &fakeEngine{maxIn: 4, maxTok: 10000, hold: hold}
		r, stop := start(t, f, Config{})
		defer stop()
		first := make(chan error, 1)
		go func() {
			_, err := r.Embed(context.Background(), inputsOf(1, 3, 1), sched.Background)
			first <- err
		}()
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		gone := make(chan error, 1)
		go func() {
			_, err := r.Embed(ctx, inputsOf(40, 3, 500), sched.Background)
			gone <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-gone; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled request: %v", err)
		}
		f.mu.Lock()
		f.hold = nil
		f.mu.Unlock()
		close(hold)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := f.callCount(); n != 1 {
			t.Errorf("%d calls: the cancelled request's inputs ran", n)
		}
		if q := r.Stats().Queued.Load(); q != 0 {
			t.Errorf("queued %d after everything ended", q)
		}
	})
}

// Each call takes a turn in its request's class; a Chat request waiting
// goes before Background ones queued earlier.
type recordingTurns struct {
	mu      sync.Mutex
	classes []sched.Class
	held    int
}

func (r *recordingTurns) Acquire(ctx context.Context, c sched.Class) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.classes = append(r.classes, c)
	r.held++
	return ctx.Err()
}

func (r *recordingTurns) Release() {
	r.mu.Lock()
	r.held--
	r.mu.Unlock()
}

func TestCallsTakeTurnsInTheirClass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		turns := &recordingTurns{}
		f := &fakeEngine{maxIn: 4, maxTok: 10000, hold: hold}
		r, stop := start(t, f, Config{Turns: turns})
		defer stop()
		var wg sync.WaitGroup
		run := func(in [][]engine.Token, c sched.Class) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.Embed(context.Background(), in, c); err != nil {
					t.Error(err)
				}
			}()
			synctest.Wait()
		}
		run(inputsOf(1, 2, 1), sched.Background) // held in its call
		run(inputsOf(2, 2, 50), sched.Background)
		run(inputsOf(1, 2, 90), sched.Chat)
		f.mu.Lock()
		f.hold = nil
		f.mu.Unlock()
		close(hold)
		wg.Wait()
		turns.mu.Lock()
		defer turns.mu.Unlock()
		if !slices.Equal(turns.classes, []sched.Class{sched.Background, sched.Chat, sched.Background}) || turns.held != 0 {
			t.Errorf("turns %v, %d held", turns.classes, turns.held)
		}
	})
}

func TestRefusals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := make(chan struct{})
		f := &fakeEngine{maxIn: 4, maxTok: 8, hold: hold}
		r, stop := start(t, f, Config{MaxQueued: 5})
		var ie *InputError
		if _, err := r.Embed(context.Background(), nil, sched.Chat); !errors.Is(err, ErrEmpty) {
			t.Errorf("no inputs: %v", err)
		}
		if _, err := r.Embed(context.Background(), [][]engine.Token{{1}, {}}, sched.Chat); !errors.As(err, &ie) || ie.Index != 1 || !errors.Is(err, ErrEmpty) {
			t.Errorf("empty input: %v", err)
		}
		if _, err := r.Embed(context.Background(), [][]engine.Token{make([]engine.Token, 9)}, sched.Chat); !errors.Is(err, ErrTooLong) {
			t.Errorf("long input: %v", err)
		}
		ended := make(chan error, 1)
		go func() { _, err := r.Embed(context.Background(), inputsOf(4, 1, 1), sched.Chat); ended <- err }()
		synctest.Wait()
		if _, err := r.Embed(context.Background(), inputsOf(2, 1, 1), sched.Chat); !errors.Is(err, ErrQueueFull) {
			t.Errorf("over the queue bound: %v", err)
		}
		// Stopping the runner fails what is still waiting.
		queued := make(chan error, 1)
		go func() { _, err := r.Embed(context.Background(), inputsOf(1, 1, 1), sched.Chat); queued <- err }()
		synctest.Wait()
		go stop()
		synctest.Wait()
		close(hold)
		if err := <-ended; err != nil {
			t.Errorf("the running call: %v", err)
		}
		if err := <-queued; !errors.Is(err, ErrClosed) {
			t.Errorf("queued at shutdown: %v", err)
		}
		if _, err := r.Embed(context.Background(), inputsOf(1, 1, 1), sched.Chat); !errors.Is(err, ErrClosed) {
			t.Errorf("after Run: %v", err)
		}
	})
}

// An engine failure fails the requests of that call, and the runner goes on.
func TestEngineFailureFailsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeEngine{maxIn: 4, maxTok: 100, fail: engine.ErrException}
		r, stop := start(t, f, Config{})
		defer stop()
		if _, err := r.Embed(context.Background(), inputsOf(2, 2, 1), sched.Chat); !errors.Is(err, engine.ErrException) {
			t.Fatalf("engine failure: %v", err)
		}
		f.mu.Lock()
		f.fail = nil
		f.mu.Unlock()
		if _, err := r.Embed(context.Background(), inputsOf(2, 2, 1), sched.Chat); err != nil {
			t.Fatal(err)
		}
	})
}
