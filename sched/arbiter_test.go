package sched

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
)

func TestNextTurnRule(t *testing.T) {
	const bound = 4
	c := func(class Class, arrival uint64, passed int) turnClaim {
		return turnClaim{class: class, arrival: arrival, passed: passed}
	}
	cases := []struct {
		name   string
		claims []turnClaim
		want   int
	}{
		{"none", nil, -1},
		{"alone", []turnClaim{c(Background, 1, 0)}, 0},
		{"most urgent class", []turnClaim{c(Background, 1, 0), c(FIM, 2, 0), c(Agent, 3, 0)}, 1},
		{"chat before fim", []turnClaim{c(FIM, 1, 0), c(Chat, 2, 0)}, 1},
		{"equal classes: longest waiting", []turnClaim{c(Agent, 5, 0), c(Agent, 3, 0), c(Agent, 4, 0)}, 1},
		{"passed over below the bound: class rules", []turnClaim{c(Background, 1, bound-1), c(Chat, 2, 0)}, 1},
		{"passed over the bound: goes first", []turnClaim{c(Chat, 1, 0), c(Background, 2, bound)}, 1},
		{"several starved: longest waiting", []turnClaim{c(FIM, 9, 0), c(Background, 4, bound+2), c(Agent, 3, bound)}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextTurn(tc.claims, bound); got != tc.want {
				t.Fatalf("nextTurn = %d, want %d", got, tc.want)
			}
		})
	}
}

// acquireAsync starts an Acquire on its own goroutine; the channel gets
// its error once it returns.
func acquireAsync(ctx context.Context, t *Turn, class Class) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- t.Acquire(ctx, class) }()
	return ch
}

// returned reports whether an async Acquire has returned (after every
// goroutine of the bubble has blocked), and its error.
func returned(ch <-chan error) (bool, error) {
	synctest.Wait()
	select {
	case err := <-ch:
		return true, err
	default:
		return false, nil
	}
}

func TestUncontendedAcquireDoesNotWait(t *testing.T) {
	a := NewArbiter(ArbiterConfig{})
	tr := a.Join("alone")
	for range 3 {
		waited, err := tr.acquire(context.Background(), Background)
		if err != nil || waited {
			t.Fatalf("acquire: waited %v, %v", waited, err)
		}
		if tr.Contended() {
			t.Fatal("contended with no one else")
		}
		tr.release(Background, true) // reserved for itself: nobody else
	}
	tr.Release()
	if err := tr.Acquire(context.Background(), Chat); err != nil {
		t.Fatal(err)
	}
	if err := tr.Acquire(context.Background(), Chat); err == nil {
		t.Fatal("a second acquire without a release succeeded")
	}
}

func TestReleaseGrantsTheMostUrgentWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewArbiter(ArbiterConfig{})
		big, small, third := a.Join("big"), a.Join("small"), a.Join("third")
		if err := big.Acquire(context.Background(), Background); err != nil {
			t.Fatal(err)
		}
		bg := acquireAsync(context.Background(), third, Background)
		synctest.Wait()
		fim := acquireAsync(context.Background(), small, FIM)
		if ok, _ := returned(fim); ok {
			t.Fatal("granted while another engine steps")
		}
		if !big.Contended() {
			t.Fatal("a FIM waiter does not contend with a background step")
		}
		if third.Contended() != true || small.Contended() {
			t.Fatalf("contended: third %v, small %v", third.Contended(), small.Contended())
		}
		big.Release()
		if ok, err := returned(fim); !ok || err != nil {
			t.Fatalf("FIM, waiting after an earlier background waiter, was not granted first: %v %v", ok, err)
		}
		if ok, _ := returned(bg); ok {
			t.Fatal("two engines hold the turn")
		}
		small.Release()
		if ok, err := returned(bg); !ok || err != nil {
			t.Fatalf("background not granted after FIM released: %v %v", ok, err)
		}
		third.Release()
	})
}

func TestReleaseWithMoreKeepsTheTurnUntilTheStarvationBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 5
		a := NewArbiter(ArbiterConfig{StarvationTurns: bound})
		chat, bg := a.Join("chat"), a.Join("bg")
		if err := chat.Acquire(context.Background(), Chat); err != nil {
			t.Fatal(err)
		}
		waiting := acquireAsync(context.Background(), bg, Background)
		synctest.Wait()
		steps := 1 // the step in flight when background began to wait
		for {
			chat.release(Chat, true)
			if ok, err := returned(waiting); ok {
				if err != nil {
					t.Fatal(err)
				}
				break
			}
			waited, err := chat.acquire(context.Background(), Chat)
			if err != nil || waited {
				t.Fatalf("the reserved step: waited %v, %v", waited, err)
			}
			steps++
			if steps > 2*bound {
				t.Fatalf("background still waits after %d chat steps", steps)
			}
		}
		if steps != bound+1 {
			t.Fatalf("background got a step after %d chat steps, want %d (the one in flight, then the bound)", steps, bound+1)
		}
		// The chat engine now waits its turn like anyone else.
		back := acquireAsync(context.Background(), chat, Chat)
		if ok, _ := returned(back); ok {
			t.Fatal("chat granted while background steps")
		}
		bg.Release()
		if ok, err := returned(back); !ok || err != nil {
			t.Fatalf("chat not granted back: %v %v", ok, err)
		}
		chat.Release()
	})
}

func TestDropPassesAReservedStepOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewArbiter(ArbiterConfig{})
		x, y := a.Join("x"), a.Join("y")
		if err := x.Acquire(context.Background(), Chat); err != nil {
			t.Fatal(err)
		}
		w := acquireAsync(context.Background(), y, Agent)
		x.release(Chat, true)
		if ok, _ := returned(w); ok {
			t.Fatal("a worse waiter took a step reserved for chat")
		}
		x.drop()
		if ok, err := returned(w); !ok || err != nil {
			t.Fatalf("dropping the reservation granted nothing: %v %v", ok, err)
		}
		y.Release()
	})
}

func TestLeaveFailsAPendingAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewArbiter(ArbiterConfig{})
		x, y, z := a.Join("x"), a.Join("y"), a.Join("z")
		if err := x.Acquire(context.Background(), Background); err != nil {
			t.Fatal(err)
		}
		wy := acquireAsync(context.Background(), y, Chat)
		wz := acquireAsync(context.Background(), z, Agent)
		synctest.Wait()
		y.Leave()
		if ok, err := returned(wy); !ok || !errors.Is(err, ErrTurnLeft) {
			t.Fatalf("pending acquire after Leave: returned %v, %v", ok, err)
		}
		if err := y.Acquire(context.Background(), Chat); !errors.Is(err, ErrTurnLeft) {
			t.Fatalf("acquire after Leave: %v", err)
		}
		y.Leave()
		// The holder leaving passes its step on.
		x.Leave()
		if ok, err := returned(wz); !ok || err != nil {
			t.Fatalf("the holder's Leave granted nothing: %v %v", ok, err)
		}
		x.Release() // no longer the holder: nothing happens
		if ok := z.Contended(); ok {
			t.Fatal("contended by turns that left")
		}
		z.Release()
	})
}

func TestCancelledAcquireWaitsNoLonger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewArbiter(ArbiterConfig{})
		x, y, z := a.Join("x"), a.Join("y"), a.Join("z")
		if err := x.Acquire(context.Background(), Background); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		wy := acquireAsync(ctx, y, Chat)
		synctest.Wait()
		wz := acquireAsync(context.Background(), z, Background)
		cancel()
		if ok, err := returned(wy); !ok || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled acquire: returned %v, %v", ok, err)
		}
		if x.Contended() {
			t.Fatal("a cancelled chat waiter still contends")
		}
		x.Release()
		if ok, err := returned(wz); !ok || err != nil {
			t.Fatalf("the step went nowhere after the cancelled waiter: %v %v", ok, err)
		}
		z.Release()
		if err := y.Acquire(ctx, Chat); !errors.Is(err, context.Canceled) {
			t.Fatalf("acquire with an ended context: %v", err)
		}
		if err := y.Acquire(context.Background(), Chat); err != nil {
			t.Fatalf("acquire after a cancelled one: %v", err)
		}
		y.Release()
	})
}

// BenchmarkUncontendedTurn is what a lone engine pays per step under an
// arbiter: acquire, then a release claiming the next step.
func BenchmarkUncontendedTurn(b *testing.B) {
	tr := NewArbiter(ArbiterConfig{}).Join("alone")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.acquire(ctx, Chat); err != nil {
			b.Fatal(err)
		}
		tr.release(Chat, true)
	}
}

func TestAMoreUrgentClaimTakesAReservedStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := NewArbiter(ArbiterConfig{})
		bg, fim, agent := a.Join("bg"), a.Join("fim"), a.Join("agent")
		if err := bg.Acquire(context.Background(), Background); err != nil {
			t.Fatal(err)
		}
		bg.release(Background, true) // nobody waits: reserved for bg
		// An equal or worse claim waits for the reserver's step.
		if ok, _ := returned(acquireAsync(context.Background(), agent, Background)); ok {
			t.Fatal("an equal class took a reserved step")
		}
		waited, err := fim.acquire(context.Background(), FIM)
		if err != nil || waited {
			t.Fatalf("FIM behind a background reservation: waited %v, %v", waited, err)
		}
		back := acquireAsync(context.Background(), bg, Background)
		if ok, _ := returned(back); ok {
			t.Fatal("the reserver ran beside the FIM step")
		}
		fim.Release()
		// bg and agent both wait with Background; agent waited longer.
		if ok, _ := returned(back); ok {
			t.Fatal("bg granted before agent, which waited longer")
		}
		a.mu.Lock()
		holder := a.holder
		a.mu.Unlock()
		if holder != agent {
			t.Fatalf("after FIM, %v holds the turn; want agent, the longest waiting", holder.Name())
		}
		agent.Release()
		if ok, err := returned(back); !ok || err != nil {
			t.Fatalf("bg not granted last: %v %v", ok, err)
		}
		bg.Release()
	})
}
