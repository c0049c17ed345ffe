package sched

import (
	"sync/atomic"
	"time"

	"superfluid/engine"
)

// job is a request from Submit until its Result: queued, running on a
// lane, or queued again after a preemption.
type job struct {
	id     uint64
	class  Class
	whole  bool // Request.Whole
	stream *Stream
	api    string // the submitter's API (WithAPI), for status views

	// prompt is what the next admission prefills: the request's prompt,
	// followed by every token generated before a preemption. It is never
	// modified once set, so the cache may keep it.
	prompt    []engine.Token
	promptLen int // the request's own prompt
	// maxTokens is how many tokens are still to generate; 0: no limit.
	maxTokens int
	sampling  engine.Sampling
	logprobs  int
	bias      []engine.LogitBias
	stop      []engine.Token
	deadline  time.Time
	// grammar is the compiled grammar constraining the output (0: none),
	// held from Submit until the job ends.
	grammar engine.GrammarID
	// adapters is the LoRA set every step of the job runs under; cacheNS
	// its namespace in the prefix cache (-1: none given yet, or none
	// left), held until the job ends, and cacheSet the set it named.
	adapters adapterSet
	// media are the prompt's images (media.go); the prompt holds their
	// key tokens.
	media     []*mediaSpan
	mediaDone func()
	cacheNS   int32
	cacheSet  engine.AdapterSetID

	submitted time.Time
	// queuedStep is the step the job was first queued on: aging and the
	// shared-prefix hold count from it, across preemptions.
	queuedStep uint64
	// resumed: a preempted lane's job, carrying its output so far.
	resumed bool

	// deferrals counts the plans the engine refused, blaming no lane, in
	// which this job was the only admission (see loop.deferAdmits).
	deferrals   int
	generated   int // tokens delivered over all admissions
	cached      int // warm prefix at the first admission
	preemptions int
	admitted    bool // at least once
	// draftTokens is the draft tokens its lanes carried, draftAccepted
	// how many of them the engine accepted (Result.DraftTokens).
	draftTokens   int
	draftAccepted int
	admittedAt    time.Time
	firstToken    time.Time
	// lastToken is when the last token was delivered (inter-token latency).
	lastToken time.Time
	// obs follows the job for an Observer; nil when none is. prefilling:
	// admitted, no token delivered since (the observer's Decoding).
	obs        JobObserver
	prefilling bool

	// How it ended, once it has.
	finish Finish
	err    error
	ended  time.Time
}

// watched reports whether a person reads this job's reply token by token:
// a Chat or FIM request whose client streams. Such a lane has an
// inter-token deadline, so prefill steps beside it stay short, and its
// prompt's first token is not held behind a tail of others' prompts.
func (j *job) watched() bool { return j.class.interactive() && !j.whole }

func (j *job) cancelled() bool { return j.stream != nil && j.stream.cancelled.Load() }

func (j *job) expired(now time.Time) bool { return !j.deadline.IsZero() && !now.Before(j.deadline) }

func (j *job) isStop(t engine.Token) bool {
	for _, s := range j.stop {
		if s == t {
			return true
		}
	}
	return false
}

// lane is a job admitted on an engine sequence. Lane tags rise with
// admission, so a higher tag is a younger lane.
type lane struct {
	tag uint32
	job *job
	seq int32
	// slot is the lane's row in status views (freeSlot): the lowest one
	// free when it was admitted, below Config.Lanes.
	slot int
	// warm is how many prompt tokens the sequence held at admission.
	warm int
	// firstAdmission: this lane is its job's first, so taking the admission
	// back (loop.deferAdmits) makes the job never admitted again.
	firstAdmission bool
	// admitted: the engine holds the lane (a step carried its admit).
	admitted bool
	// restoring: the cache is reading the lane's warm prefix from disk
	// (RestoringCache); the lane is in no plan until restoreReady is
	// raised, by the reader, and the import is done.
	restoring    bool
	restoreReady *atomic.Bool
	// prefilled is how many prompt tokens the sequence holds; npast how
	// many tokens in all. The engine's lane events are the truth for both.
	prefilled int
	npast     int
	// produced is the tokens sampled on this lane; tokens is the job's
	// prompt followed by all of them: what the sequence holds, plus the
	// last sampled token (never fed back).
	produced int
	tokens   []engine.Token
	// finishing: the lane is done (or preempted) and retires in the next
	// plan; its job has its result unless preempted.
	finishing bool
	preempted bool
	// parkForPressure: preempted at Critical pressure; its stream goes to
	// the disk tier as it is released (pressure.go).
	parkForPressure bool
	// prefillStarved counts prefill steps younger lanes took while this one
	// waited; decodeStarved steps it put no token into.
	prefillStarved int
	decodeStarved  int
	// setWait counts the steps this lane had work in but another LoRA
	// adapter set ran (lora.go).
	setWait int
	// chunk is the prompt tokens planned for this lane in the step being
	// planned.
	chunk int
	// The step's draft: draftLen tokens at the plan's Tokens[draftOff:];
	// the tokens the step sampled for the lane and how many of the first
	// ones equal the draft (spec.go). gate decides whether it drafts.
	draftOff, draftLen       int
	stepTokens, stepAccepted int
	gate                     laneGate
}

// grammarReplay is how many of the job's prompt tokens are its own output
// (generated before a preemption), which the engine walks its grammar over.
func (j *job) grammarReplay() uint32 {
	if j.grammar == 0 {
		return 0
	}
	return uint32(len(j.prompt) - j.promptLen)
}

// remaining is the prompt tokens left to prefill.
func (l *lane) remaining() int { return len(l.job.prompt) - l.prefilled }

// decoding: the prompt is in and a token is pending.
func (l *lane) decoding() bool { return l.prefilled >= len(l.job.prompt) }

// toGenerate is how many tokens the lane may still sample; -1: no limit.
func (l *lane) toGenerate() int {
	if l.job.maxTokens == 0 {
		return -1
	}
	return l.job.maxTokens - l.produced
}
