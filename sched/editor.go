package sched

import "time"

// An editor at work: what the planner does for FIM requests beyond their
// class's place in every order (fim-under-load measured a completion at
// 2.3 times its idle latency beside four background prompts).
//
// An editor sends its next completion moments after the last one ends, so
// it lands in the step that began when the last one ended: a background
// prefill step of the interactive bound (0.15 s), about the whole of a
// small model's idle completion's latency again. While FIM work ran on
// this engine within interactiveWindow, an Agent or Background prefill step
// therefore fits editorWaitDecodeSteps of the measured decode step
// instead, when that is shorter: a wait of a quarter of a 32-token
// completion's decoding, whatever the model (a small model's 6 ms steps
// give 48 ms; a large model's stay at the interactive bound). Its cost is
// the background prompts': their steps run fewer tokens each, so they
// prefill more slowly while the editor works.
//
// While a FIM reply that ends within editorHoldSecs decodes, Agent and
// Background lanes put no token into its steps (as their prefill already
// waits for it, holdForShortReply): each of its steps runs at the idle
// cost of one row rather than beside their rows, attending over their
// contexts. They lose at most the few hundred milliseconds of the reply; a
// lane passed over StarvationSteps steps decodes anyway, so an editor
// completing without pause cannot stop them.
const (
	editorWaitDecodeSteps = 8
	editorHoldSecs        = 1.0
	// editorHoldTokens bounds a held reply while the decode step time is
	// unknown.
	editorHoldTokens = 32
)

// editorAtWork reports whether this engine ran FIM work within
// interactiveWindow.
func (p *planner) editorAtWork(now time.Time) bool {
	return !p.lastFIM.IsZero() && now.Sub(p.lastFIM) < interactiveWindow
}

// worseWaitSecs bounds an Agent or Background prefill step while a person
// is at work (see stepPrefillBudget): interactiveWaitSecs, or less while
// an editor works here.
func (p *planner) worseWaitSecs(now time.Time) float64 {
	if p.editorAtWork(now) && p.decodeStepSecs > 0 {
		return min(interactiveWaitSecs, editorWaitDecodeSteps*p.decodeStepSecs)
	}
	return interactiveWaitSecs
}

// shortFIMDecoding reports a FIM lane decoding a reply that ends within
// editorHoldSecs at the measured decode step time (editorHoldTokens while
// it is unknown): Agent and Background lanes then do not decode beside it.
func (p *planner) shortFIMDecoding() bool {
	return p.replyEndingWithin(func(c Class) bool { return c == FIM }, editorHoldSecs, editorHoldTokens)
}
