package engine

// Finish says why a lane stopped generating.
type Finish uint32

// Finish reasons.
const (
	FinishNone    Finish = iota
	FinishEOG            // the model produced an end-of-generation token
	FinishLength         // the lane's token limit
	FinishContext        // the sequence filled the context
	FinishError          // the lane failed; its LaneEvent's Status says why
	FinishGrammar        // the lane's grammar is complete: nothing more may follow
)

func (f Finish) String() string {
	switch f {
	case FinishNone:
		return "none"
	case FinishEOG:
		return "eog"
	case FinishLength:
		return "length"
	case FinishContext:
		return "context"
	case FinishError:
		return "error"
	case FinishGrammar:
		return "grammar"
	}
	return "unknown"
}

// TokenEvent is one sampled token. Finish is set on a lane's last token.
type TokenEvent struct {
	Lane    uint32
	Token   Token
	Logprob float32 // of the sampled token, when logprobs were asked for
	TopOff  uint32  // into Events.Top
	TopLen  uint32
	Finish  Finish
}

// TopLogprob is one of the most likely tokens at a position.
type TopLogprob struct {
	Token   Token
	Logprob float32
}

// LaneEvent is where a lane stands after a step.
type LaneEvent struct {
	Lane      uint32
	Finish    Finish
	Prefilled uint32 // prompt tokens in the sequence
	NPast     uint32 // tokens in the sequence
	Generated uint32 // tokens sampled since admission
	Status    Status // of the lane's last step
}

// Timings are what the scheduler learns step times from.
type Timings struct {
	StepNS        int64 // the step's llama_decode; 0: the plan ran none
	PrefillTokens uint32
	DecodeTokens  uint32
	// Tokens sampled under an active grammar: GrammarFast where the
	// unconstrained choice was allowed (one token checked), GrammarMasked
	// where it was not and the whole vocabulary was masked.
	GrammarFast   uint32
	GrammarMasked uint32
	// Draft rows the step verified (Decode.DraftLen summed) and how many
	// of them the lanes accepted.
	DraftTokens   uint32
	DraftAccepted uint32
}

// Events is what one step reports: its tokens (one per lane, or a drafted
// lane's accepted drafts and the token after them, in order), their
// logprobs, where each lane it touched stands, and its timing. Its slices
// belong to the engine and stay valid until the next Tick.
type Events struct {
	Tokens  []TokenEvent
	Top     []TopLogprob
	Lanes   []LaneEvent
	Timings Timings
}

// TopOf returns the top logprobs recorded for a token event.
func (ev *Events) TopOf(t *TokenEvent) []TopLogprob {
	return ev.Top[t.TopOff : t.TopOff+t.TopLen]
}
