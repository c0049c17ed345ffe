package http

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"superfluid/chat"
	"superfluid/engine"
	"superfluid/sched"
	"superfluid/task"
)

// A toy engine under the real scheduler, so that requests go through the
// real handlers, the real scheduler and the real HTTP server on a loopback
// socket with only the model faked: the tests of what a request's
// goroutines do when they panic, when the scheduler shuts down under them,
// or when their client stops reading.

// toyEngine implements engine.Engine with a byte-level "model" that writes
// the alphabet over and over and never ends on its own: only max_tokens,
// the context or a cancellation end a generation. Each step takes step of
// wall time, the toy's cost model.
type toyEngine struct {
	desc  engine.Descriptor
	step  time.Duration
	seqs  [][]engine.Token
	lanes map[uint32]*toyLane
	ev    engine.Events
	// script, when set, is what every lane writes instead of the
	// alphabet, byte by byte, then the end of generation: a scripted
	// model for the tests of how replies are parsed.
	script   []byte
	grammars atomic.Uint32
}

// The toy takes grammars and ignores them: a scripted reply is already
// what a test wants the grammar to have produced.
func (e *toyEngine) AcquireGrammar(*engine.GrammarSpec) (engine.GrammarID, error) {
	return engine.GrammarID(e.grammars.Add(1)), nil
}

func (e *toyEngine) ReleaseGrammar(engine.GrammarID) {}

type toyLane struct {
	tag        uint32
	seq        int32
	prompt     []engine.Token
	prefilled  int
	generated  int
	max        int
	logprobs   int
	pending    bool // a sampled token waits to be fed back
	finish     engine.Finish
	touchedAll bool
}

const toyEOS = 256

func newToyEngine(lanes, ctx int, step time.Duration) *toyEngine {
	return &toyEngine{
		desc: engine.Descriptor{Architecture: "toy", Vocab: toyEOS + 1, Ctx: ctx, Seqs: 2 * lanes, Lanes: lanes, Batch: 512,
			BOS: -1, EOS: toyEOS, EOT: -1, EOG: []engine.Token{toyEOS},
			FIM: engine.FIM{Prefix: -1, Suffix: -1, Middle: -1, Pad: -1, RepoName: -1, FileSep: -1}, Identity: "toy"},
		step:  step,
		seqs:  make([][]engine.Token, 2*lanes),
		lanes: map[uint32]*toyLane{},
	}
}

func (e *toyEngine) Descriptor() *engine.Descriptor { return &e.desc }

func (e *toyEngine) CopyPrefix(src, dst int32, n int) error {
	e.seqs[dst] = append(e.seqs[dst][:0], e.seqs[src][:n]...)
	return nil
}

func (e *toyEngine) Truncate(seq int32, keep int) error {
	e.seqs[seq] = e.seqs[seq][:min(keep, len(e.seqs[seq]))]
	return nil
}

func (e *toyEngine) Free(seq int32) error { return e.Truncate(seq, 0) }
func (e *toyEngine) SeqLen(seq int32) int { return len(e.seqs[seq]) }
func (e *toyEngine) Export(int32, []byte) ([]byte, error) {
	return nil, &engine.Error{Status: engine.StatusUnsupported, Op: "export"}
}

func (e *toyEngine) Import(int32, []byte) (int, error) {
	return 0, &engine.Error{Status: engine.StatusUnsupported, Op: "import"}
}

// Tick runs the plan as the real engine does: retires and admits, then one
// step carrying the prefill chunks beside one token of each decoding lane.
func (e *toyEngine) Tick(p *engine.Plan) (*engine.Events, error) {
	ev := &e.ev
	ev.Tokens, ev.Top, ev.Lanes, ev.Timings = ev.Tokens[:0], ev.Top[:0], ev.Lanes[:0], engine.Timings{}
	var touched []*toyLane
	touch := func(l *toyLane) {
		if !l.touchedAll {
			l.touchedAll = true
			touched = append(touched, l)
		}
	}
	for _, tag := range p.Retires {
		delete(e.lanes, tag)
	}
	for i := range p.Admits {
		a := &p.Admits[i]
		l := &toyLane{tag: a.Lane, seq: a.Seq, prompt: append([]engine.Token(nil), p.Tokens[a.PromptOff:a.PromptOff+a.PromptLen]...),
			prefilled: int(a.Cached), max: int(a.MaxTokens), logprobs: int(a.Logprobs)}
		e.seqs[a.Seq] = e.seqs[a.Seq][:a.Cached]
		e.lanes[a.Lane] = l
		touch(l)
	}
	for _, f := range p.Prefills {
		touch(e.lanes[f.Lane])
	}
	var decoding []*toyLane
	for _, d := range p.Decodes {
		l := e.lanes[d.Lane]
		touch(l)
		decoding = append(decoding, l)
	}
	if len(decoding) > 0 || len(p.Prefills) > 0 {
		time.Sleep(e.step)
		for _, f := range p.Prefills {
			l := e.lanes[f.Lane]
			e.seqs[l.seq] = append(e.seqs[l.seq], l.prompt[f.Offset:f.Offset+f.Count]...)
			l.prefilled += int(f.Count)
			ev.Timings.PrefillTokens += f.Count
			if l.prefilled == len(l.prompt) {
				e.sample(l)
			}
		}
		for _, l := range decoding {
			e.seqs[l.seq] = append(e.seqs[l.seq], e.lastToken(l))
			l.pending = false
			ev.Timings.DecodeTokens++
			e.sample(l)
		}
		ev.Timings.StepNS = int64(e.step)
	}
	for _, l := range touched {
		l.touchedAll = false
		ev.Lanes = append(ev.Lanes, engine.LaneEvent{Lane: l.tag, Finish: l.finish, Prefilled: uint32(l.prefilled),
			NPast: uint32(len(e.seqs[l.seq])), Generated: uint32(l.generated)})
	}
	return ev, nil
}

// toyToken is the toy model: the alphabet, one letter per token.
func toyToken(generated int) engine.Token { return engine.Token('a' + generated%26) }

func (e *toyEngine) lastToken(l *toyLane) engine.Token { return e.token(l.generated - 1) }

func (e *toyEngine) token(generated int) engine.Token {
	if e.script == nil {
		return toyToken(generated)
	}
	if generated < len(e.script) {
		return engine.Token(e.script[generated])
	}
	return toyEOS
}

func (e *toyEngine) sample(l *toyLane) {
	t := e.token(l.generated)
	l.generated++
	te := engine.TokenEvent{Lane: l.tag, Token: t}
	if l.logprobs > 0 {
		te.Logprob, te.TopOff, te.TopLen = -0.5, uint32(len(e.ev.Top)), uint32(l.logprobs)
		for k := range l.logprobs {
			e.ev.Top = append(e.ev.Top, engine.TopLogprob{Token: t + engine.Token(k), Logprob: -0.5 - float32(k)})
		}
	}
	switch {
	case t == toyEOS:
		l.finish = engine.FinishEOG
	case l.max > 0 && l.generated >= l.max:
		l.finish = engine.FinishLength
	case len(e.seqs[l.seq]) >= e.desc.Ctx:
		l.finish = engine.FinishContext
	default:
		l.pending = true
	}
	te.Finish = l.finish
	e.ev.Tokens = append(e.ev.Tokens, te)
}

// toyCache caches nothing: every admission starts cold on a free sequence.
type toyCache struct {
	eng  *toyEngine
	busy []bool
}

func (c *toyCache) Acquire([]engine.Token) (int32, int, error) {
	for i, b := range c.busy {
		if !b {
			c.busy[i] = true
			c.eng.seqs[i] = c.eng.seqs[i][:0]
			return int32(i), 0, nil
		}
	}
	return 0, 0, fmt.Errorf("toy cache: every sequence is busy")
}

func (c *toyCache) Release(seq int32, _ []engine.Token) { c.busy[seq] = false }
func (c *toyCache) Relieve() bool                       { return false }

// toyText is the byte-level vocabulary. Each token renders as its byte
// repeated pieceLen times (long pieces fill socket buffers quickly). Once
// closed — standing for an engine whose vocabulary Close freed — a render
// is a fault the test reports.
type toyText struct {
	pieceLen int
	closed   atomic.Bool
	late     atomic.Int64 // renders after close
}

func (x *toyText) Tokenize(text string, _, _ bool) ([]engine.Token, error) {
	out := make([]engine.Token, len(text))
	for i := range len(text) {
		out[i] = engine.Token(text[i])
	}
	return out, nil
}

func (x *toyText) AppendPiece(dst []byte, tok engine.Token, _ bool) []byte {
	if x.closed.Load() {
		x.late.Add(1)
		return append(dst, "\xff<freed vocabulary>"...)
	}
	if tok < 0 || tok >= toyEOS {
		return dst
	}
	for range max(x.pieceLen, 1) {
		dst = append(dst, byte(tok))
	}
	return dst
}

func (x *toyText) Detokenize(tokens []engine.Token, special bool) string {
	var b []byte
	for _, t := range tokens {
		b = x.AppendPiece(b, t, special)
	}
	return string(b)
}

// toyStack is a server over the toy engine, listening on loopback.
type toyStack struct {
	srv   *Server
	sched *sched.Scheduler
	text  *toyText
	url   string
	addr  string

	stopSched context.CancelFunc
	schedDone chan struct{}
	// run starts the scheduler (once; startToy does unless paused).
	run func()
}

type toyOptions struct {
	lanes    int           // default 4
	step     time.Duration // default 1ms
	pieceLen int           // default 1
	cfg      Config
	script   string // what the toy writes (see toyEngine.script); "" the alphabet
	template string // the chat template; "" ChatML
	// wrap, when set, is the scheduler the model submits to, around the
	// stack's own.
	wrap func(*sched.Scheduler) task.Scheduler
	// paused leaves the scheduler stopped until toyStack.run.
	paused bool
}

func startToy(t *testing.T, o toyOptions) *toyStack {
	t.Helper()
	if o.lanes == 0 {
		o.lanes = 4
	}
	if o.step == 0 {
		o.step = time.Millisecond
	}
	eng := newToyEngine(o.lanes, 1<<16, o.step)
	if o.script != "" {
		eng.script = []byte(o.script)
	}
	sc, err := sched.New(eng, &toyCache{eng: eng, busy: make([]bool, len(eng.seqs))}, sched.Config{Lanes: o.lanes})
	if err != nil {
		t.Fatal(err)
	}
	src := cmp.Or(o.template, chat.ChatML)
	tmpl, err := chat.Parse(src, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng.desc.ChatTemplate = src
	srv, err := NewServer(o.cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := &toyText{pieceLen: o.pieceLen}
	var submitTo task.Scheduler = sc
	if o.wrap != nil {
		submitTo = o.wrap(sc)
	}
	srv.SetModel(&Model{Model: task.Model{Name: "toy", Path: "/models/toy.gguf", Desc: eng.Descriptor(), Text: text, Sched: submitTo, Chat: tmpl}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &toyStack{srv: srv, sched: sc, text: text, url: "http://" + ln.Addr().String(), addr: ln.Addr().String(), schedDone: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	ts.stopSched = cancel
	var once sync.Once
	ts.run = func() { once.Do(func() { go func() { sc.Run(ctx); close(ts.schedDone) }() }) }
	if !o.paused {
		ts.run()
	}
	served := make(chan struct{})
	go func() { srv.Serve(ln); close(served) }()
	t.Cleanup(func() {
		srv.srv.Shutdown()
		ln.Close()
		<-served
		ts.run() // a paused stack's queued requests fail on close
		ts.closeSched()
	})
	return ts
}

// closeSched stops the scheduler (every request still running fails with
// sched.ErrClosed) and waits until it has.
func (ts *toyStack) closeSched() {
	ts.stopSched()
	<-ts.schedDone
}

// waitIdle waits until no lane runs and nothing is queued: whatever the
// test did has freed its lanes. The bound is generous; the usual wait is a
// few steps.
func (ts *toyStack) waitIdle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		active, queued := ts.sched.Stats().LanesActive, ts.queued()
		if active == 0 && queued == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lanes still busy: %d active, %d queued", active, queued)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// queued is how many requests wait for a lane, every class together.
func (ts *toyStack) queued() int {
	n := int64(0)
	for _, q := range ts.sched.Stats().QueueDepth {
		n += q
	}
	return int(n)
}

// post sends body to path and returns the status and the whole body.
func (ts *toyStack) post(t *testing.T, path, body string) (int, string) {
	t.Helper()
	resp, err := nethttp.Post(ts.url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading the body: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// setTokenHook installs h as the token hook for the rest of the test.
func setTokenHook(t *testing.T, h func(g *task.Spec, n int)) {
	t.Helper()
	task.TokenHook.Store(&h)
	t.Cleanup(func() { task.TokenHook.Store(nil) })
}

// onceAt returns a hook that calls f, on the goroutine following the
// generation, at its n-th token — once, for the first generation to get
// there.
func onceAt(n int, f func()) func(*task.Spec, int) {
	var done sync.Once
	return func(_ *task.Spec, i int) {
		if i == n {
			done.Do(f)
		}
	}
}
