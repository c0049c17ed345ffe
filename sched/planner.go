package sched

import (
	"time"

	"superfluid/engine"
)

// planner decides; it does no IO. Like raft's RawNode, its owner feeds it
// arrivals, the time and each step's events, and asks it for the next
// step's plan; the owner carries the plan out on the engine and the planner's
// decisions on the cache and the streams (see loop). Given the same inputs
// it makes the same plans, which is what lets its tests run in virtual
// time against a fake engine.
type planner struct {
	cfg Config
	// shortReplyHoldSince is when the current run of steps holding worse
	// prefill back for short replies began; zero: none is running.
	shortReplyHoldSince time.Time
	// shortReplyReleased: the hold ran its course; worse classes may
	// prefill until one has.
	shortReplyReleased bool
	batch              int // the engine's most tokens per step
	ubatch             int // its micro-batch: a step's efficient size
	ctx                int // the engine's context: most tokens a sequence holds
	// checkpointEvery is the spacing of the engine's partial-state
	// checkpoints (0: the model keeps none; see alignToCheckpoint).
	checkpointEvery int
	// checkpointTail: a step also ends this many tokens before a prompt's
	// end, where the engine checkpoints (0: none).
	checkpointTail int
	// adapters is how many LoRA adapters the engine loaded; stepSet the
	// set the step being planned runs under (lora.go).
	adapters int
	stepSet  adapterSet
	cacheNS  cacheNamespaces
	stats    *counters
	// rowChunks are the step's media row prefills, run after its tick
	// (media.go).
	rowChunks []rowChunk

	queues [NumClasses][]*job
	lanes  []*lane // by tag: oldest first
	steps  uint64  // plans made for a non-empty set of lanes
	// nextTag names the next lane; tags rise with admission.
	nextTag uint32

	// Learned rates (see rates.go): a decode-only step (seconds; 0 until
	// measured); a row of a prefill step by its depth.
	decodeStepSecs float64
	prefillCost    rowCost
	// stepRows and stepDepth are the plan's rows and the sum of their
	// positions, which its timings are learnt against.
	stepRows  int
	stepDepth float64
	// decodeOwed is the decode-only time owed to the prefill steps that
	// ran (decodeShare of their time), paid before the next prefill step.
	decodeOwed float64
	// stepInteractiveDecode: a watched lane (a streamed Chat or FIM reply,
	// job.watched) decodes in the step of plan.
	stepInteractiveDecode bool
	// lastInteractive is when a plan last carried a Chat or FIM lane's
	// prompt or token: a person at work on this engine.
	lastInteractive time.Time
	// lastFIM is when a plan last carried a FIM lane's prompt or token: an
	// editor at work on this engine (editor.go).
	lastFIM time.Time
	// bgDivisor throttles Agent and Background decoding to one step in N.
	bgDivisor int
	// pressure is the machine's memory pressure (pressure.go).
	pressure Pressure
	// elsewhere reports whether another engine shares the machine, whose
	// newcomers would wait out this one's step, and whether one ran Chat
	// or FIM work moments ago (Turn.others); nil: none.
	elsewhere func() (joined, interactive bool)

	// Admission round state: queued jobs passed over for the shared-prefix
	// hold (at the head of each class), admission stopped for this step,
	// lanes preemption freed for Chat/FIM requests.
	heldSkip            [NumClasses]int
	admitBlocked        bool
	reservedInteractive int
	// kvBackoff stops admission after a lane was preempted for KV room,
	// until a lane finishes.
	kvBackoff bool

	// spec drafts decoding lanes' next tokens (spec.go).
	spec specState

	plan  engine.Plan
	order []*lane // prefill order, reused
	cands []*lane // decoding lanes, reused

	ready ready
}

// ready is what the owner must carry out after a planner call: tokens to
// deliver, jobs that ended, sequences to give back to the cache. Its slices
// are reused; the owner empties them with clear.
type ready struct {
	tokens   []readyToken
	done     []*job
	releases []release
}

type readyToken struct {
	job *job
	ev  int // index into the tick's Events.Tokens
}

type release struct {
	seq    int32
	tokens []engine.Token
	obs    JobObserver // the lane's job's, told of the publish; may be nil
	// discard: the sequence holds a stream the cache must not publish
	// (computed under a LoRA set): the loop empties it and releases it
	// holding nothing.
	discard bool
	park    bool // to the disk tier: the lane was parked for pressure
	// ns and set: the namespace the tokens are tagged in (-1: none) and
	// the set it named then; a namespace given away since discards them.
	ns  int32
	set engine.AdapterSetID
}

func (r *ready) clear() {
	clear(r.tokens)
	clear(r.done)
	clear(r.releases)
	r.tokens, r.done, r.releases = r.tokens[:0], r.done[:0], r.releases[:0]
}

func newPlanner(cfg Config, d *engine.Descriptor, stats *counters) *planner {
	ubatch := d.UBatch
	if ubatch <= 0 {
		ubatch = min(d.Batch, defaultUBatch)
	}
	return &planner{cfg: cfg, batch: d.Batch, ubatch: min(ubatch, d.Batch), ctx: d.Ctx, checkpointEvery: d.CheckpointEvery, checkpointTail: d.CheckpointTail,
		adapters: d.LoRA, cacheNS: newCacheNamespaces(d.Vocab), stats: stats, bgDivisor: cfg.BackgroundDivisor, spec: newSpecState(cfg.Speculation, d, cfg.Lanes)}
}

// defaultUBatch is an engine's micro-batch when its descriptor names none
// (llama.cpp's default).
const defaultUBatch = 512

// liveLanes is the lanes holding a slot past this step: a finishing lane
// retires before anything is admitted, so its slot is already free.
func (p *planner) liveLanes() int {
	n := 0
	for _, l := range p.lanes {
		if !l.finishing {
			n++
		}
	}
	return n
}

func (p *planner) find(tag uint32) *lane {
	for _, l := range p.lanes {
		if l.tag == tag {
			return l
		}
	}
	return nil
}

// idle: nothing runs and nothing waits.
func (p *planner) idle() bool { return len(p.lanes) == 0 && p.queued() == 0 }

// sweep ends what was cancelled or passed its deadline: queued jobs leave
// their queue, running lanes finish (and retire in the next plan).
func (p *planner) sweep(now time.Time) {
	for c := range p.queues {
		q := p.queues[c][:0]
		for _, j := range p.queues[c] {
			if j.cancelled() || j.expired(now) {
				p.failQueued(j, now)
				continue
			}
			q = append(q, j)
		}
		clear(p.queues[c][len(q):])
		p.queues[c] = q
	}
	for _, l := range p.lanes {
		switch {
		case l.finishing:
		case l.job.cancelled():
			p.finishLane(l, FinishCancelled, nil, now)
		case l.job.expired(now):
			p.stats.expired.Add(1)
			p.finishLane(l, FinishDeadline, nil, now)
		}
	}
	p.dropUnstarted()
}

// dropUnstarted drops finished lanes no tick admitted: the engine has
// nothing of them to retire, and their sequences go straight back.
func (p *planner) dropUnstarted() {
	p.dropLanes(func(l *lane) bool { return l.finishing && !l.admitted })
}

// finishLane ends a lane's job; the lane retires in the next plan.
func (p *planner) finishLane(l *lane, f Finish, err error, now time.Time) {
	if l.finishing && !l.preempted {
		return
	}
	l.finishing = true
	l.preempted = false
	p.endJob(l.job, f, err, now)
}

// endJob records how a job ended and hands it to the owner. A job that
// never ran keeps the error saying why; one that ran ends without one when
// it was cancelled or ran out of time.
func (p *planner) endJob(j *job, f Finish, err error, now time.Time) {
	if j.admitted && (f == FinishCancelled || f == FinishDeadline) {
		err = nil
	}
	if f == FinishCancelled {
		p.stats.cancelled.Add(1)
	}
	j.finish, j.err, j.ended = f, err, now
	p.ready.done = append(p.ready.done, j)
}

// dropLanes removes the lanes drop selects, releasing their sequences and
// requeueing the jobs of preempted ones. The engine must no longer hold
// them.
func (p *planner) dropLanes(drop func(*lane) bool) {
	kept := p.lanes[:0]
	for _, l := range p.lanes {
		if !drop(l) {
			kept = append(kept, l)
			continue
		}
		rel := p.releaseOf(l.job, l.seq, l.tokens[:l.npast:l.npast])
		rel.obs = l.job.obs
		rel.park = l.preempted && l.parkForPressure
		p.ready.releases = append(p.ready.releases, rel)
		if l.preempted {
			p.requeuePreempted(l)
		} else {
			p.kvBackoff = false
		}
	}
	clear(p.lanes[len(kept):])
	p.lanes = kept
	if len(p.lanes) == 0 {
		p.kvBackoff = false
	}
}

// joinerWaits reports whether a request could join after this step and
// would wait it out: a lane is free, a Chat or FIM request waits, or a lane
// runs that such a request could preempt. Such a step stays short.
func (p *planner) joinerWaits() bool {
	if p.cfg.Lanes <= 1 {
		return false
	}
	if p.liveLanes() < p.cfg.Lanes || len(p.queues[Chat]) > 0 || len(p.queues[FIM]) > 0 {
		return true
	}
	for _, l := range p.lanes {
		if !l.finishing && !l.job.class.interactive() {
			return true
		}
	}
	return false
}

// alone reports whether one lane runs and no request waits for one: its
// prompt holds up nobody but a request yet to come.
func (p *planner) alone() bool { return p.liveLanes() == 1 && p.queued() == 0 }

// othersElsewhere is Turn.others for this engine: false, false without
// an arbiter.
func (p *planner) othersElsewhere() (joined, interactive bool) {
	if p.elsewhere == nil {
		return false, false
	}
	return p.elsewhere()
}

// runnableClass is the most urgent class among the lanes the next step
// can put into the engine (prompt left, or a token to sample), which is
// the class an engine states for its turn; false: the step decodes
// nothing (retires and admits only, or lanes waiting on restores).
func (p *planner) runnableClass() (Class, bool) {
	best, ok := Class(0), false
	for _, l := range p.lanes {
		if l.finishing || l.restoring {
			continue
		}
		if l.remaining() <= 0 && l.toGenerate() == 0 {
			continue
		}
		if !ok || l.job.class < best {
			best, ok = l.job.class, true
		}
	}
	return best, ok
}

// laneOf is the lane running j, or nil.
func (p *planner) laneOf(j *job) *lane {
	for _, l := range p.lanes {
		if l.job == j {
			return l
		}
	}
	return nil
}
