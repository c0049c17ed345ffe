package sched

import (
	"sync"
	"sync/atomic"
	"time"

	"superfluid/metric"
)

// counters are the scheduler's live counters. The runner goroutine writes
// them with atomics; anyone may read a Snapshot at any time without
// holding the scheduler up.
type counters struct {
	ticks             atomic.Uint64
	prefillTokens     atomic.Uint64
	decodeTokens      atomic.Uint64
	warmPrefixTokens  atomic.Uint64
	admissions        atomic.Uint64
	coldAdmissions    atomic.Uint64
	admitsDeferred    atomic.Uint64
	preemptions       atomic.Uint64
	starvationGrants  atomic.Uint64
	sharedPrefixHolds atomic.Uint64
	kvFull            atomic.Uint64
	tickErrors        atomic.Uint64
	cancelled         atomic.Uint64
	expired           atomic.Uint64
	completed         atomic.Uint64

	grammarFastTokens   atomic.Uint64
	grammarMaskedTokens atomic.Uint64

	draftTokens     atomic.Uint64
	draftAccepted   atomic.Uint64
	draftGateClosed atomic.Uint64

	turnWaits  atomic.Uint64
	turnWaitNS atomic.Uint64

	pressureParks        atomic.Uint64
	pressureEvictedBytes atomic.Uint64

	lanesActive       atomic.Int64
	queueDepth        [NumClasses]atomic.Int64
	prefillBudgetLive atomic.Int64

	ttftCount atomic.Uint64
	// ttft is the time-to-first-token histogram, made on first use so a
	// zero counters (the planner's tests) is ready as it is.
	ttftOnce sync.Once
	ttft     *metric.Histogram
}

// Snapshot is a copy of the counters at one moment (each read atomically;
// the set is not one transaction).
type Snapshot struct {
	Ticks             uint64 // engine steps that carried work
	PrefillTokens     uint64 // prompt tokens prefilled
	DecodeTokens      uint64 // tokens generated and delivered
	WarmPrefixTokens  uint64 // prompt tokens admissions found in the cache
	Admissions        uint64
	ColdAdmissions    uint64 // admissions that found nothing cached
	AdmitsDeferred    uint64 // admissions put off for want of a sequence
	Preemptions       uint64
	StarvationGrants  uint64 // decode steps of lanes that had starved
	SharedPrefixHolds uint64 // admissions put off for a shared prefix
	KVFull            uint64 // steps failed by a full KV pool
	TickErrors        uint64 // steps the engine failed otherwise
	Cancelled         uint64
	Expired           uint64 // requests that passed their deadline
	Completed         uint64 // requests ended, however

	// Tokens sampled under a grammar: GrammarFastTokens where the model's
	// unconstrained choice was allowed (one token checked),
	// GrammarMaskedTokens where it was not and the vocabulary was masked.
	GrammarFastTokens   uint64
	GrammarMaskedTokens uint64

	// Speculative decoding (Config.Speculation, n-gram drafts): draft
	// tokens the steps verified, those accepted, and the times a lane's
	// throughput gate stopped its drafts.
	DraftTokens uint64
	// DraftSource is the configured draft source the draft counters count
	// (--spec-type); ngram-simple when speculation is off, as before.
	DraftSource     SpecType
	DraftAccepted   uint64
	DraftGateClosed uint64

	// Under an Arbiter (Config.Arbiter): the steps that waited for another
	// engine's, and the time they waited, in milliseconds.
	TurnWaits  uint64
	TurnWaitMS uint64

	// Memory pressure (pressure.go): Background lanes parked for it, and
	// the bytes the cache evicted for it (host memory and pool).
	PressureParks        uint64
	PressureEvictedBytes uint64

	LanesActive   int64
	QueueDepth    [NumClasses]int64 // by Class
	PrefillBudget int64             // the last step's prompt budget

	// TTFTCount counts first tokens delivered; TTFT is their live
	// histogram (superfluid_ttft_seconds), rendered at scrape time.
	TTFTCount uint64
	TTFT      *metric.Histogram
}

// Snapshot reads the counters.
func (s *counters) Snapshot() Snapshot {
	out := Snapshot{
		Ticks:                s.ticks.Load(),
		PrefillTokens:        s.prefillTokens.Load(),
		DecodeTokens:         s.decodeTokens.Load(),
		WarmPrefixTokens:     s.warmPrefixTokens.Load(),
		Admissions:           s.admissions.Load(),
		ColdAdmissions:       s.coldAdmissions.Load(),
		AdmitsDeferred:       s.admitsDeferred.Load(),
		Preemptions:          s.preemptions.Load(),
		StarvationGrants:     s.starvationGrants.Load(),
		SharedPrefixHolds:    s.sharedPrefixHolds.Load(),
		KVFull:               s.kvFull.Load(),
		TickErrors:           s.tickErrors.Load(),
		Cancelled:            s.cancelled.Load(),
		Expired:              s.expired.Load(),
		Completed:            s.completed.Load(),
		GrammarFastTokens:    s.grammarFastTokens.Load(),
		GrammarMaskedTokens:  s.grammarMaskedTokens.Load(),
		DraftTokens:          s.draftTokens.Load(),
		DraftAccepted:        s.draftAccepted.Load(),
		DraftGateClosed:      s.draftGateClosed.Load(),
		TurnWaits:            s.turnWaits.Load(),
		TurnWaitMS:           s.turnWaitNS.Load() / uint64(time.Millisecond),
		PressureParks:        s.pressureParks.Load(),
		PressureEvictedBytes: s.pressureEvictedBytes.Load(),
		LanesActive:          s.lanesActive.Load(),
		PrefillBudget:        s.prefillBudgetLive.Load(),
		TTFTCount:            s.ttftCount.Load(),
		TTFT:                 s.ttftHistogram(),
	}
	for i := range s.queueDepth {
		out.QueueDepth[i] = s.queueDepth[i].Load()
	}
	return out
}

// observeTurnWait counts one step's wait for the arbiter's turn.
func (s *counters) observeTurnWait(d time.Duration) {
	s.turnWaits.Add(1)
	s.turnWaitNS.Add(uint64(max(d, 0)))
}

// observeTTFT counts one time to first token: once a request, so the
// library's histogram (a lock and a bucket search) costs nothing that
// shows; see metric's benchmarks.
func (s *counters) observeTTFT(d time.Duration) {
	s.ttftHistogram().Observe(max(d, 0).Seconds())
	s.ttftCount.Add(1)
}

func (s *counters) ttftHistogram() *metric.Histogram {
	s.ttftOnce.Do(func() { s.ttft = ttftSeconds.New() })
	return s.ttft
}

// publishOccupancy stores the lanes and queue depths.
func (p *planner) publishOccupancy() {
	p.stats.lanesActive.Store(int64(len(p.lanes)))
	for c := range p.queues {
		p.stats.queueDepth[c].Store(int64(len(p.queues[c])))
	}
}
