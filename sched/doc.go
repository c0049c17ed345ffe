// Package sched is superfluid's scheduler: it decides, step by step, which
// requests share the engine and how, so that the people waiting on a reply
// get it first without starving the work nobody watches.
//
// # Shape
//
// The scheduler is split the way etcd's raft is. The planner decides and
// does no IO: it holds the queues and lanes, is told the time and what
// each engine step did, and answers with the next step's engine.Plan and a
// list of things to do (tokens to deliver, results to hand out, sequences
// to give back). The loop does those things: it asks the prefix Cache for
// sequences, runs plans on the engine, and feeds the events back. The
// Scheduler runs the loop on one goroutine (Run) that owns the engine, the
// cache and all scheduling state; Submit, Stream.Cancel and Stats may be
// called from anywhere and only hand things to it. The planner reads the
// injected Clock and the engine's per-step timings, nothing else, so its
// tests run against a fake engine in virtual time and check exact plans
// (testdata/*.txt and *.golden are such traces, at batch 64, 512 and
// 2048).
//
// # Requests, classes and lanes
//
// A request has a Class, best first: Chat (a person reads the reply as it
// streams), FIM (an editor waits on an inline completion), Agent (a
// foreground agent) and Background. It waits in its class's queue until a
// lane is free. A lane is a request admitted on an engine sequence; the
// engine runs up to Config.Lanes of them at once (continuous batching:
// lanes join and leave between steps). A free lane goes to the queue head
// with the best effective class; a request's class improves one level for
// each StarvationSteps steps it has waited (aging), and a class may be
// capped to a number of lanes (ClassLanes, "background=2,agent=6").
//
// Admission asks the Cache for a sequence already holding the longest
// cached prefix of the prompt, so a conversation's next turn, or a
// request sharing a system prompt, prefills only what is new. A queued
// agent or background request whose prompt shares at least 1024 tokens
// with a lane that will publish them within 64 tokens waits for it (at
// most 256 steps) rather than prefill the shared part twice.
//
// # A step
//
// The planner plans every engine step (iteration-level scheduling, as in
// Orca, vLLM and SGLang): one engine.Plan is one llama_decode of retires,
// admits, prompt chunks (chunked prefill) and one token for each decoding
// lane, and its events are that step's tokens, finishes, logprobs and
// timing. A newcomer therefore waits at most the step in flight, and
// cancellations and deadlines are seen when the next step is planned.
//
// Prefill. Steps are sized by time, not tokens: the batch (the engine's
// n_batch, --batch, 2048 by default) only caps them, beside one row for
// each decoding lane (Config.PrefillBudget caps them too). While someone
// could wait on the step — a newcomer could join after it (a free lane
// beside other work, a waiting Chat/FIM, or a lane such a request could
// preempt), another engine shares the arbiter, or a Chat or FIM reply
// decodes in it — a step carries what fits half a second beside its
// decoding rows, in whole 16-token steps and never below 64. A prompt
// alone (one lane, nothing queued, nothing elsewhere), or one that no
// request could join, runs the engine's efficient size: whole
// micro-batches (the engine's n_ubatch, which llama_decode splits a step
// into and beyond which a bigger step gains little) within two seconds,
// at least one; a request arriving waits out that step (one 512-token
// micro-batch of the 0.5b model on the 2-core CPU, about 2 s). While this
// engine, or another sharing the arbiter, carried Chat or FIM work within
// the last 10 s (a person at work: an editor's next completion comes
// within seconds), a step prefilling only Agent and Background prompts
// fits 0.15 s (see "Several engines"). Until a step has taught the cost,
// a step is one micro-batch. The
// seconds come from a cost model of a step's rows: a prompt token's
// attention reads every position before it, so a row at depth d costs
// about a + b·d (the tiny model's 512-token steps over one 1,500-token
// prompt took 0.13, 0.53, then 1.12 s). a and b are a least-squares line
// through each measured prefill step's seconds per row against its rows'
// mean depth, over exponentially decaying weights (a new step weighs a
// fifth), learnt at the step sizes that run (the fixed cost of a step is
// folded into a); it is a flat rate until the steps span some depth,
// neither coefficient is ever negative, and one step's time counts as at
// most 1.5 times off the fit, so a stall or a hostile timing moves it
// little (cost.go). The budget is what fits at the depth of the deepest
// prompt left, counting the rows' growing depth within the chunk. The
// decode share is owed in measured seconds (held to the same 1.5 times the
// fit) and the short-reply hold in the measured decode step (one step
// counting as at most 1.5 times the step learnt, so a stall on a loaded
// machine does not release the hold): a reply of a few seconds hardly
// deepens its lane. A reply taken whole
// (Request.Whole: a response that is not streamed, a batch job) has no
// inter-token deadline: its decoding lane does not shorten the step, and
// its completing prompt caps no tail, so requests already waiting prefill
// together as far as the step's bound allows (eight non-streamed
// completions arriving together prefill in one step, as llama-server
// does); an idle runner woken by such requests first gathers the rest of
// their burst while requests the HTTP layer announced (Expect) are still
// on their way, at most 30 ms, and a lone request not at all (burst.go).
// While an editor works
// here (FIM work within interactiveWindow), the 0.15 s bound on Agent and
// Background prefill steps shrinks to eight of the measured decode steps
// when that is shorter (editor.go). The tokens
// go to lanes in prefill order:
// better classes, then the shortest remaining prompt, then the oldest;
// prompts that arrived together therefore finish one after another rather
// than all late. A lane passed over by younger lanes for StarvationSteps
// prefill steps goes first, so a long prompt keeps progressing under a
// stream of short ones; while a Chat or FIM prompt waits, starving lanes
// of worse classes share a quarter of the step as planned between them
// (one of them alone would fill it and halve the waiting prompt's speed).
// A Chat or FIM prompt takes all the room the batch has left, so one that
// fits runs in one step (beside a decoding Chat or FIM reply only the
// half-second bound's worth, whose tokens wait out the step), and nothing
// of a worse class prefills beside it. Once a prompt
// completes in a step, the rest of the step's prefill is capped at that
// chunk's size (at least 256, so the cap binds on steps of a 512-token
// micro-batch or more): its first token is sampled at the end of the step, and a big
// tail would hold it back. While a Chat or FIM lane decodes a reply that
// ends within about four seconds (an editor's completion, a bounded
// answer), Agent and Background prompts wait for it: a prefill step beside
// each of its tokens would stretch the reply several-fold; a run of such
// holds lasting eight seconds lets them prefill once.
//
// Decode. Every decoding lane puts one token into each step it is planned
// into, prefill steps included. Decode is owed a share of each prefill
// step's measured time — a quarter, twice the prefill's while a Chat or
// FIM lane decodes, whose short reply matters more than someone's prompt —
// paid in decode-only steps before the next prefill step; a waiting Chat
// or FIM prompt is not made to wait it out. Lanes that starved go first;
// Agent and Background decoding may be throttled to one step in N
// (BackgroundDivisor), and puts no token into the steps of a FIM reply
// that ends within a second (editor.go), short of StarvationSteps.
//
// # Restores
//
// A Cache that implements RestoringCache (package kv's does) reads a
// parked stream off the scheduler's goroutine: a request whose best warm
// prefix is on disk is admitted restoring — it holds a lane and its
// sequence but is in no plan — while a reader goroutine reads, verifies
// and decompresses the file; the other lanes keep stepping. When the read
// ends, the scheduler's goroutine imports the state and the lane prefills
// the rest of its prompt; a failed read or import leaves the sequence
// empty and the lane prefills cold. (Exports for parking copy state out
// of the KV pool on the scheduler's goroutine, the engine's owner, and
// hand the bytes to the park writer, which compresses and writes them.)
//
// # Preemption
//
// With every lane busy and a Chat or FIM request waiting, the worst lane
// of a worse class gives its lane up: a decoding lane first, else a
// prefilling one; the worst class, then the youngest. It retires in the
// next plan (the engine retires before it admits, so the waiting request
// takes the slot in that same step) and its sequence goes to the cache.
// Its job returns to the head of its queue with its prompt plus every
// token generated so far as the new prompt, and its token limit reduced;
// it resumes warm, with only its last sampled token to prefill, and never
// delivers a token twice, so under greedy sampling its output is exactly
// what an unpreempted run produces. (With temperature sampling the
// engine's random stream restarts, so the continuation differs.)
//
// Memory pressure (SetPressure, pressure.go) uses the same path: at
// Critical every decoding Background lane is preempted, its stream moved
// to the disk tier, and no Background job admitted until it clears; at
// Warning and above the cache sheds host memory and idle entries.
//
// # Grammars
//
// A request may carry a grammar (Request.Grammar). Submit compiles it on
// the caller's goroutine through the engine's engine.Grammars (a cache
// keyed by the spec's digest, so a repeated grammar is a lookup) and fails
// with an error satisfying errors.Is(err, engine.ErrGrammar) if it does
// not parse; the job holds the compiled grammar's reference until it ends.
// Its admissions name the grammar; a preempted job's re-admission also
// says how many of its prompt's tokens are its own output so far
// (Admit.GrammarReplay), which the engine walks the grammar over before
// sampling, so the continuation follows the grammar from where it was. A
// lane whose grammar is complete ends with FinishGrammar. Snapshot counts
// the grammar tokens the engine's one-token check accepted
// (GrammarFastTokens) and those it had to mask the vocabulary for
// (GrammarMaskedTokens).
//
// # Ending
//
// A lane ends on an end-of-generation token, its MaxTokens, a full
// context, a complete grammar, one of its StopTokens (which the engine
// does not know: the scheduler stops the lane), Cancel, or its Deadline.
// Cancellation and deadlines stop a lane within one engine step: both are
// checked when each step is planned, and a token sampled in the step in
// flight for a cancelled lane is not delivered. A queued request that is
// cancelled or whose deadline passes never starts (ErrCancelled,
// ErrDeadline). A lane that ended retires in a retire-only plan right
// away, and its sequence — prompt plus the reply fed back, never the last
// sampled token — reaches the cache before the client hears the result,
// so its next turn starts warm.
//
// When a step fails with engine.ErrKVFull, the cache evicts (Relieve) and
// the step is planned again; when nothing is left to evict, the worst
// lane is preempted (and admissions pause until a lane finishes), or, if
// it is alone, fails with an error saying so.
//
// # Several engines
//
// Several models in one process share the machine's cores, and two
// llama_decode calls at once thrash ggml's spinning threadpools and run
// at half speed or worse. So one engine step runs at a time, and an
// Arbiter (one per process) decides whose. Each engine's Scheduler holds
// a Turn (Config.Arbiter): before a step that decodes it states the most
// urgent class among its lanes with work (planner.runnableClass) and
// waits for the turn; after the step it releases it, claiming the next
// one with its next class if work remains. A step of retires and admits
// only, lanes waiting on restores, and an idle engine take no turn and
// keep none.
//
// The decision (nextTurn, a pure function) follows the per-engine rules
// across engines: the most urgent class claiming anywhere goes first, so
// an editor's FIM step on a small model goes before a large model's
// background prefill step; among equal classes, the engine that has
// waited longest; and an engine passed over ArbiterConfig.StarvationTurns
// grants (64) goes next whatever its class, the cross-engine form of
// StarvationSteps. The releasing engine's claim counts as the newest, and
// when it wins the step is reserved for it: a worse engine does not slip
// in between two steps of a better one's reply, and equal classes
// alternate (a more urgent claim arriving before the reserver's acquire
// takes the step instead). A Chat or FIM request submitted while its
// engine waits raises the engine's claim to its class, and an engine that
// waited takes in what arrived meanwhile before planning, so the request
// runs in the step the engine waited for. An uncontended acquire is a
// mutex and no allocation (about 40 ns), and a lone engine under an
// arbiter plans exactly as without one.
//
// A step cannot be interrupted, so an interactive request arriving at one
// engine waits for the step in flight on another. Each engine therefore
// bounds its Agent and Background prefill steps, while another engine
// shares the arbiter, as it does while a newcomer of its own could join
// (joinWaitSecs' worth at the learned cost for the prompt's depth, never
// below one 64-token step): the wait a Chat or FIM request suffers on another engine is the
// bound a newcomer has on its own (≈1.1 s for 64 tokens of the 0.5b
// model on the 2-core CPU). The shrink applies whenever another engine is
// joined, not only while one waits with a more urgent class
// (Turn.Contended) or runs Chat or FIM work: the first request to an idle
// engine arrives during a step planned before anyone waited, and that
// step must already be short. Its cost is the newcomer rule's: steps of
// half a second rather than a micro-batch or more, which loses little
// (the kernels' rate at a quarter of a micro-batch is most of theirs).
// Half a second of a large model is still long, and an editor's completions on a small model would
// each wait one out. So while another engine has run Chat or FIM work in
// the last interactiveWindow (10 s: a person at work there), a step that
// prefills only Agent and Background prompts fits interactiveWaitSecs
// (0.15 s), down to 8 tokens, below the 64-token floor: the first request
// of a burst waits a whole step, the later ones about 0.15 s. The small
// steps run the kernels at a fraction of their throughput, but only
// while that person works. Aborting a running llama_decode through llama.cpp's abort
// callback would cut the wait to about one layer's compute; it is a
// possible next step, not done.
//
// # Observing
//
// Config.Observer, when set, is told of each request's life as it happens
// (observe.go): Start on Submit's goroutine, then on the scheduler's the
// admission (the cache asked over what interval, the tokens it matched and
// their tier, when the Cache is a TierReporter), a restore's end, each
// step that prefilled part of the prompt, the first token of each
// admission, a preemption, each publish of the lane's sequence (parked or
// not) and the end. Package tracing turns it into OpenTelemetry spans; the
// scheduler imports no tracing library and, without an Observer, does
// nothing more than test a nil. Snapshot also carries what llama-server's
// and the inference gateway's metric names need (metrics_compat.go).
//
// # Failures
//
// The planner never makes a plan the engine refuses: a step's prompt
// chunks and decoding lanes fit the engine's batch, lanes never exceed its
// count, and Submit refuses what the engine's admission would. Should the
// engine refuse a plan or fail a step all the same, only what it blames
// suffers (fault.go). An error naming a lane (engine.FaultLane) fails that
// lane's request alone; the lane leaves the engine, and the step is
// planned again for the others, their output unchanged. One naming no lane is planned again with half the
// admissions (the others wait at the head of their queues; a request
// refused alone more than three times fails); only when a plan admitting
// nothing fails too does every lane fail. Every such step is logged at
// ERROR with its plan's shape (Config.Logger) and counted
// (Snapshot.TickErrors).
package sched
