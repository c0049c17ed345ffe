package keys

import (
	"math"
	"time"
)

// bucket is a token bucket over virtual time: it holds up to capacity
// units and refills at capacity per minute, so a key may spend a whole
// minute's allowance at once and then the allowance as it refills. A
// charge larger than what is left may push it below zero (a request's
// token estimate, settled at its end); it refuses only while it holds
// less than what is asked. Every method takes the time, so tests drive
// it without a clock.
type bucket struct {
	capacity float64 // 0: no limit
	level    float64
	at       time.Time // when level was last brought up to date
}

func newBucket(perMinute int, now time.Time) bucket {
	return bucket{capacity: float64(perMinute), level: float64(perMinute), at: now}
}

func (b *bucket) limited() bool { return b.capacity > 0 }

// ratePerSecond is the refill rate.
func (b *bucket) ratePerSecond() float64 { return b.capacity / 60 }

// refill brings the level up to now.
func (b *bucket) refill(now time.Time) {
	if now.After(b.at) {
		b.level = math.Min(b.capacity, b.level+now.Sub(b.at).Seconds()*b.ratePerSecond())
		b.at = now
	}
}

// need is what a charge of n must find in the bucket: n, or the whole
// capacity when n is more than the bucket ever holds (else it could
// never pass).
func (b *bucket) need(n float64) float64 { return math.Min(n, b.capacity) }

// wait is how long until the bucket holds need(n); 0 when it does now.
func (b *bucket) wait(n float64, now time.Time) time.Duration {
	b.refill(now)
	short := b.need(n) - b.level
	if short <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(short / b.ratePerSecond() * float64(time.Second)))
}

// take charges n when the bucket holds need(n), and reports whether it did.
func (b *bucket) take(n float64, now time.Time) bool {
	if b.wait(n, now) > 0 {
		return false
	}
	b.level -= n
	return true
}

// give returns n units (a settled estimate that was too high), or charges
// -n more (one that was too low).
func (b *bucket) give(n float64, now time.Time) {
	b.refill(now)
	b.level = math.Min(b.capacity, b.level+n)
}

// resize takes a reloaded limit: the units left carry over, capped by
// the new capacity; a bucket that had no limit starts full.
func (b *bucket) resize(perMinute int, now time.Time) {
	if !b.limited() {
		*b = newBucket(perMinute, now)
		return
	}
	b.refill(now)
	b.capacity = float64(perMinute)
	b.level = math.Min(b.level, b.capacity)
}

// remaining is the whole units left now (never below 0).
func (b *bucket) remaining(now time.Time) int {
	b.refill(now)
	return int(math.Max(0, math.Floor(b.level)))
}

// untilFull is how long until the bucket is full again.
func (b *bucket) untilFull(now time.Time) time.Duration {
	b.refill(now)
	return time.Duration(math.Ceil((b.capacity - b.level) / b.ratePerSecond() * float64(time.Second)))
}
