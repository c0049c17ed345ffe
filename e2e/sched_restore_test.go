package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"superfluid/kv"
	"superfluid/sched"
)

// A lane restores a 4,000-token parked stream while another decodes, on
// the real engine, cache and park store: the restore's read is held open
// (kv.Config.BeforeRestoreRead) until the decoding lane has taken ten more
// steps, which it can only do if the scheduler's goroutine is not the one
// reading. The restored lane then starts warm and says what it says alone.
func TestSchedRestoreRunsBesideDecodingLanes(t *testing.T) {
	dir := t.TempDir()
	st1 := newSchedStack(t, stackConfig{lanes: 2, ctx: 8192, parkDir: dir, kv: kv.Config{ParkEager: true}})
	ref := newRefEngine(t, tinyModel(t), 4096)
	long := textTokens(t, st1.eng.Engine, 4000, 31)
	first, _ := st1.run(t, sched.Request{Prompt: long, Class: sched.Agent, MaxTokens: 2})
	parked := joinTokens(long, first[:1]) // the sequence: prompt and the token fed back
	st1.close(t)

	const during = 10
	entered := make(chan struct{})
	stepped := make(chan struct{}, 4*during)
	var heldSteps int
	timedOut := false
	var once sync.Once
	hook := func(int) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return // one restore is held open
		}
		close(entered)
		deadline := time.After(2 * time.Minute)
		for heldSteps < during {
			select {
			case <-stepped:
				heldSteps++
			case <-deadline:
				timedOut = true
				return
			}
		}
	}
	st := newSchedStack(t, stackConfig{lanes: 2, ctx: 8192, parkDir: dir, kv: kv.Config{BeforeRestoreRead: hook}})
	e := st.eng.Engine
	dec := sched.Request{Prompt: textTokens(t, e, 30, 32), Class: sched.Chat, MaxTokens: 3000}
	sd, err := st.s.Submit(context.Background(), dec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sd.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	tagD, _ := laneAdmitted(st.eng.log(), len(dec.Prompt))
	st.eng.setAfter(func(_ int, r *tickRecord) {
		select {
		case <-entered:
			if r.decodes[tagD] == 1 {
				select {
				case stepped <- struct{}{}:
				default:
				}
			}
		default:
		}
	})
	resumed := sched.Request{Prompt: joinTokens(parked, textTokens(t, e, 40, 33)), Class: sched.Agent, MaxTokens: 6}
	out, res := st.run(t, resumed)
	st.eng.setAfter(nil)
	sd.Cancel()
	if timedOut {
		t.Fatalf("the decoding lane took %d steps while the restore was held open; want %d", heldSteps, during)
	}
	if heldSteps < during {
		t.Fatalf("the restore never started (%d steps seen)", heldSteps)
	}
	if res.CachedTokens != len(parked) || res.Err != nil {
		t.Fatalf("the resumed request: %+v; want %d cached tokens", res, len(parked))
	}
	if hits := st.cache.Stats().ParkHits.Load(); hits != 1 {
		t.Fatalf("%d restores counted", hits)
	}
	expectAlone(t, ref, "restored", resumed.Prompt, out, resumed.MaxTokens)
}
