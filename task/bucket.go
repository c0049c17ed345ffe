package task

import (
	"math"
	"time"
)

// Bucket is a token bucket: it holds up to Burst tokens, refills at Rate
// tokens a second, and each admitted request takes one. It reads no
// clock (the caller passes the time), so its tests run in virtual time;
// it is not safe for concurrent use (FIMGate locks it).
type Bucket struct {
	rate   float64 // tokens per second
	burst  float64
	tokens float64
	last   time.Time // when tokens was last brought up to date
}

// NewBucket is a full bucket refilling at rate tokens a second up to burst.
func NewBucket(rate float64, burst int) *Bucket {
	return &Bucket{rate: rate, burst: float64(burst), tokens: float64(burst)}
}

// Take takes a token at now. When none is left it takes nothing and says
// how long until one will be: a client retrying after that is admitted
// (unless another took it first).
func (b *Bucket) Take(now time.Time) (ok bool, retryAfter time.Duration) {
	b.refill(now)
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := (1 - b.tokens) / b.rate
	// Rounded up to the millisecond the client is told, so that retrying
	// after it never comes back to an empty bucket through rounding.
	return false, time.Duration(math.Ceil(wait*1000)) * time.Millisecond
}

// refill adds what the rate gave since the last call; time going
// backwards (a clock step) adds nothing.
func (b *Bucket) refill(now time.Time) {
	if b.last.IsZero() {
		b.last = now
		return
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
}
