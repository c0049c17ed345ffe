// Package sched is superfluid's scheduler: it decides, tick by tick, which
// requests share the engine and how, so that the people waiting on a reply
// get it first without starving the work nobody watches.
//
// # Shape
//
// The scheduler is split the way etcd's raft is. The planner decides and
// does no IO: it holds the queues and lanes, is told the time and what
// each tick did, and answers with the next engine.Plan and a list of
// things to do (tokens to deliver, results to hand out, sequences to give
// back). The loop does those things: it asks the prefix Cache for
// sequences, runs plans on the engine, and feeds the events back. The
// Scheduler runs the loop on one goroutine (Run) that owns the engine, the
// cache and all scheduling state; Submit, Stream.Cancel and Stats may be
// called from anywhere and only hand things to it. Because the planner is
// deterministic, its tests run against a fake engine in virtual time and
// check exact plans (testdata/*.txt and *.golden are such traces).
//
// # Requests, classes and lanes
//
// A request has a Class, best first: Chat (a person reads the reply as it
// streams), FIM (an editor waits on an inline completion), Agent (a
// foreground agent) and Background. It waits in its class's queue until a
// lane is free. A lane is a request admitted on an engine sequence; the
// engine runs up to Config.Lanes of them at once (continuous batching:
// lanes join and leave between ticks). A free lane goes to the queue head
// with the best effective class; a request's class improves one level for
// each StarvationTicks ticks it has waited (aging), and a class may be
// capped to a number of lanes (ClassLanes, "background=2,agent=6").
//
// Admission asks the Cache for a sequence already holding the longest
// cached prefix of the prompt, so a conversation's next turn, or a
// request sharing a system prompt, prefills only what is new. A queued
// agent or background request whose prompt shares at least 1024 tokens
// with a lane that will publish them within a few dozen tokens waits for
// it (at most 64 ticks) rather than prefill the shared part twice.
//
// # A tick
//
// Each tick is one engine.Plan: retires, admits, prompt chunks (chunked
// prefill) and decode grants. Its first step carries every prompt chunk
// beside one token per decoding lane; later steps decode only.
//
// Prefill. The tick's prompt tokens are a budget. It adapts to the
// measured prefill rate so that prefill takes its share of the tick target
// (TickTarget, 2s), and is smaller while a newcomer could join after the
// tick (a free lane, a waiting Chat/FIM, or a lane such a request could
// preempt): then it is what fits half a second (two seconds with no Chat
// or FIM around, since the engine yields mid-tick when one arrives), in
// whole 512-token chunks or 128-token steps, at most 1024. The budget goes
// to lanes in prefill order: better classes, then the shortest remaining
// prompt, then the oldest; prompts that arrived together therefore finish
// one after another rather than all late. A lane passed over by younger
// lanes for StarvationTicks ticks goes first, so a long prompt keeps
// progressing under a stream of short ones; while a Chat or FIM prompt
// waits, starving lanes of worse classes share a quarter of the step
// between them (at the CPU's 64-token steps one of them alone would fill
// it and halve the waiting prompt's speed). Once a prompt completes in a
// tick, the rest of the tick's prefill is capped at that chunk's size (at
// least 256): its first token is sampled at the end of the step, and a big
// tail would hold it back. When a Chat or FIM prompt completes, nothing of
// a worse class prefills beside it that tick; and while a Chat or FIM lane
// decodes a reply that ends within about four seconds (an editor's
// completion, a bounded answer), Agent and Background prompts wait for it:
// a prefill step beside each of its tokens would stretch the reply
// several-fold.
//
// Decode. Each decoding lane may run a number of rounds (tokens) this
// tick. Without prefill it is what fills the tick target at the measured
// round time (between 32 and 256), a quarter second while a lane is free,
// and never past the first lane to reach its token limit (so its slot
// frees). Beside prefill it is a share of the prefill's time (a quarter;
// twice the prefill's when a Chat or FIM lane decodes, whose short reply
// matters more than someone's prompt), at least 8. Lanes that starved go
// first; Agent and Background decoding may be throttled to one tick in N
// (BackgroundDivisor).
//
// # Preemption
//
// With every lane busy and a Chat or FIM request waiting, the worst lane
// of a worse class gives its lane up: a decoding lane first, else a
// prefilling one; the worst class, then the youngest. It retires in the
// next plan (the engine retires before it admits, so the waiting request
// takes the slot in that same tick) and its sequence goes to the cache.
// Its job returns to the head of its queue with its prompt plus every
// token generated so far as the new prompt, and its token limit reduced;
// it resumes warm, with only its last sampled token to prefill, and never
// delivers a token twice, so under greedy sampling its output is exactly
// what an unpreempted run produces. (With temperature sampling the
// engine's random stream restarts, so the continuation differs.)
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
// does not know: the scheduler stops the lane and discards what the tick
// sampled after it), Cancel, or its Deadline. Cancellation and deadlines stop a lane within
// one engine step: Cancel (and a deadline timer) raise the engine's yield
// word, the tick ends at its next step boundary, and the lane retires. A
// queued request that is cancelled or whose deadline passes never starts
// (ErrCancelled, ErrDeadline). A lane that ended retires in a retire-only
// tick right away, and its sequence — prompt plus the reply fed back,
// never the last sampled token — reaches the cache before the client
// hears the result, so its next turn starts warm.
//
// When a tick fails with engine.ErrKVFull, the cache evicts (Relieve) and
// the tick is planned again; when nothing is left to evict, the worst
// lane is preempted (and admissions pause until a lane finishes), or, if
// it is alone, fails with an error saying so.
//
// # Failures
//
// The planner never makes a plan the engine refuses: the first step's
// prompt chunks and decoding lanes fit the engine's batch, lanes never
// exceed its count, and Submit refuses what the engine's admission would.
// Should the engine refuse a plan or fail a tick all the same, only what
// it blames suffers (fault.go). An error naming a lane (engine.FaultLane)
// fails that lane's request alone; the lane leaves the engine, and the
// tick is planned again for the others in the same step, their output
// unchanged. One naming no lane is planned again with half the
// admissions (the others wait at the head of their queues; a request
// refused alone more than three times fails); only when a plan admitting
// nothing fails too does every lane fail. Every such tick is logged at
// ERROR with its plan's shape (Config.Logger) and counted
// (Snapshot.TickErrors).
package sched
