package e2e

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"superfluid/engine"
	"superfluid/sched"
)

// Two real engines under one arbiter: no two of their decoding steps run
// at once, the FIM engine waits its turns while the other prefills
// background prompts, and every output is what the request produces run
// alone.
func TestSchedTwoEnginesShareOneArbiter(t *testing.T) {
	arb := sched.NewArbiter(sched.ArbiterConfig{})
	big := newSchedStack(t, stackConfig{lanes: 2, sched: sched.Config{Arbiter: arb.Join("big")}})
	small := newSchedStack(t, stackConfig{lanes: 2, sched: sched.Config{Arbiter: arb.Join("small")}})
	ref := newRefEngine(t, tinyModel(t), 4096)

	// Steps that decode something, in flight across both engines.
	var inFlight, overlaps atomic.Int32
	bigPrefills := make(chan struct{})
	var once sync.Once
	for _, st := range []*schedStack{big, small} {
		st.eng.before = func(_ int, p *engine.Plan) {
			if len(p.Prefills)+len(p.Decodes) > 0 && inFlight.Add(1) > 1 {
				overlaps.Add(1)
			}
			if st == big && len(p.Prefills) > 0 {
				once.Do(func() { close(bigPrefills) })
			}
		}
		st.eng.after = func(_ int, rec *tickRecord) {
			if len(rec.prefill)+len(rec.decodes) > 0 {
				inFlight.Add(-1)
			}
		}
	}

	e := big.eng.Engine
	fim := func(i int) sched.Request {
		return sched.Request{Prompt: textTokens(t, e, 80, uint64(100+i)), Class: sched.FIM, MaxTokens: 12}
	}
	idleOut, idle := small.run(t, fim(0))
	expectAlone(t, ref, "idle fim", fim(0).Prompt, idleOut, 12)

	bgs := []sched.Request{
		{Prompt: textTokens(t, e, 1500, 1), Class: sched.Background, MaxTokens: 16},
		{Prompt: textTokens(t, e, 1500, 2), Class: sched.Background, MaxTokens: 16},
	}
	var wg sync.WaitGroup
	bgOut := make([][]engine.Token, len(bgs))
	for i, req := range bgs {
		s, err := big.s.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { bgOut[i], _ = collectStream(t, s) })
	}
	<-bigPrefills
	var loaded []sched.Result
	for i := 1; i <= 3; i++ {
		out, res := small.run(t, fim(i))
		expectAlone(t, ref, "fim beside background", fim(i).Prompt, out, 12)
		loaded = append(loaded, res)
	}
	wg.Wait()
	for i, req := range bgs {
		expectAlone(t, ref, "background", req.Prompt, bgOut[i], req.MaxTokens)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d decoding steps ran beside another engine's", n)
	}
	if small.s.Stats().TurnWaits == 0 {
		t.Fatal("the FIM engine never waited for its turn: the test shows nothing")
	}
	t.Logf("FIM TTFT idle %v; beside background prefill %v %v %v; small engine waited %d turns, %d ms",
		idle.TTFT, loaded[0].TTFT, loaded[1].TTFT, loaded[2].TTFT, small.s.Stats().TurnWaits, small.s.Stats().TurnWaitMS)
}
