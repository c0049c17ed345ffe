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

	// As llama-server counts them (its /metrics): steps that ran a
	// llama_decode, the lanes busy in each summed, the time of steps
	// carrying prompt tokens, and each ended request's generation after
	// its first token (steps and time).
	decodeCalls          atomic.Uint64
	busySlots            atomic.Uint64
	promptNS             atomic.Uint64
	predictSteps         atomic.Uint64
	predictNS            atomic.Uint64
	pressureParks        atomic.Uint64
	pressureEvictedBytes atomic.Uint64

	lanesActive       atomic.Int64
	queueDepth        [NumClasses]atomic.Int64
	prefillBudgetLive atomic.Int64
	// kvTokens is the KV cells the lanes hold (their sequences' tokens).
	kvTokens atomic.Int64

	// board holds the lanes and queues for status views (occupancy.go).
	board occupancyBoard

	ttftCount atomic.Uint64
	// The time-to-first-token and inter-token histograms, by class, made
	// on first use so a zero counters (the planner's tests) is ready as
	// it is.
	histOnce sync.Once
	ttft     *[NumClasses]*metric.Histogram
	itl      *[NumClasses]*metric.Histogram
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

	// As llama-server counts them: steps that ran a llama_decode, the
	// busy lanes of those steps summed, the time of steps carrying prompt
	// tokens, and ended requests' generation after their first token
	// (PredictSteps tokens over PredictNS).
	DecodeCalls  uint64
	BusySlots    uint64
	PromptNS     uint64
	PredictSteps uint64
	PredictNS    uint64
	// Memory pressure (pressure.go): Background lanes parked for it, and
	// the bytes the cache evicted for it (host memory and pool).
	PressureParks        uint64
	PressureEvictedBytes uint64

	LanesActive   int64
	QueueDepth    [NumClasses]int64 // by Class
	PrefillBudget int64             // the last step's prompt budget
	// KVTokens is the KV cells the lanes' sequences hold; KVCapacity the
	// engine's context (cells in all). Cached entries no lane uses are not
	// counted: the cache evicts them for a lane that needs the room.
	KVTokens   int64
	KVCapacity int64

	// TTFTCount counts first tokens delivered; TTFT and ITL are the live
	// histograms by class (superfluid_ttft_seconds, superfluid_itl_seconds),
	// rendered at scrape time; nil in a zero Snapshot.
	TTFTCount uint64
	TTFT      *[NumClasses]*metric.Histogram
	ITL       *[NumClasses]*metric.Histogram
}

// KVUtilisation is the share of the KV pool the lanes hold, in [0, 1].
func (s Snapshot) KVUtilisation() float64 {
	if s.KVCapacity <= 0 {
		return 0
	}
	return min(max(float64(s.KVTokens)/float64(s.KVCapacity), 0), 1)
}

// QueuedTotal is the requests waiting for a lane, all classes.
func (s Snapshot) QueuedTotal() int64 {
	var n int64
	for _, d := range s.QueueDepth {
		n += d
	}
	return n
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
		DecodeCalls:          s.decodeCalls.Load(),
		BusySlots:            s.busySlots.Load(),
		PromptNS:             s.promptNS.Load(),
		PredictSteps:         s.predictSteps.Load(),
		PredictNS:            s.predictNS.Load(),
		LanesActive:          s.lanesActive.Load(),
		PrefillBudget:        s.prefillBudgetLive.Load(),
		KVTokens:             s.kvTokens.Load(),
		PressureParks:        s.pressureParks.Load(),
		PressureEvictedBytes: s.pressureEvictedBytes.Load(),
		TTFTCount:            s.ttftCount.Load(),
	}
	out.TTFT, out.ITL = s.histograms()
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
func (s *counters) observeTTFT(c Class, d time.Duration) {
	ttft, _ := s.histograms()
	ttft[c].Observe(max(d, 0).Seconds())
	s.ttftCount.Add(1)
}

// observeITL counts the time between two tokens delivered to a request
// (the library's lock and bucket search, about 50 ns a token).
func (s *counters) observeITL(c Class, d time.Duration) {
	_, itl := s.histograms()
	itl[c].Observe(max(d, 0).Seconds())
}

func (s *counters) histograms() (ttft, itl *[NumClasses]*metric.Histogram) {
	s.histOnce.Do(func() {
		s.ttft, s.itl = new([NumClasses]*metric.Histogram), new([NumClasses]*metric.Histogram)
		for c := range NumClasses {
			s.ttft[c] = ttftSeconds.New(Class(c).String())
			s.itl[c] = itlSeconds.New(Class(c).String())
		}
	})
	return s.ttft, s.itl
}

// countDecode counts one step that ran a llama_decode with busy lanes,
// prefilling prompt tokens, in d.
func (s *counters) countDecode(busy int, prompt uint32, d time.Duration) {
	s.decodeCalls.Add(1)
	s.busySlots.Add(uint64(busy))
	if prompt > 0 {
		s.promptNS.Add(uint64(max(d, 0)))
	}
}

// observeGeneration counts an ended request's generation after its first
// token, as llama-server's predicted-tokens rate does: the tokens after
// the first (each a decode step's) over the time they took.
func (s *counters) observeGeneration(j *job) {
	if j.firstToken.IsZero() || j.generated < 2 {
		return
	}
	s.predictSteps.Add(uint64(j.generated - 1))
	s.predictNS.Add(uint64(max(j.lastToken.Sub(j.firstToken), 0)))
}

// publishOccupancy stores the lanes, the cells they hold and the queue
// depths, and the lanes' and queues' views (publishLanes).
func (p *planner) publishOccupancy() {
	p.stats.lanesActive.Store(int64(len(p.lanes)))
	var cells int
	for _, l := range p.lanes {
		cells += l.npast
	}
	p.stats.kvTokens.Store(int64(cells))
	for c := range p.queues {
		p.stats.queueDepth[c].Store(int64(len(p.queues[c])))
	}
	p.publishLanes()
}
