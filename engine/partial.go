package engine

// Partial is what of a model's memory a cut (Truncate, or CopyPrefix of
// fewer tokens than the source holds) can lose (Descriptor.Partial).
type Partial string

const (
	// PartialNone: every layer keeps a cell per token; any cut is valid.
	PartialNone Partial = ""
	// PartialSWA: sliding-window layers, whose cells llama.cpp reuses once
	// every window has left them; a cut is valid only where the window
	// below it is still held (PartialCuts.MinCut).
	PartialSWA Partial = "swa"
	// PartialRecurrent: recurrent layers (hybrid models, Mamba, RWKV),
	// whose state exists only at the sequence's end: no cut is valid,
	// only a resume from a checkpoint.
	PartialRecurrent Partial = "recurrent"
)

// Checkpoint is a sequence's partial state (its sliding-window cells or
// recurrent state) at Pos tokens, a self-describing blob the engine
// refuses for another model or when damaged. With the full-attention cells
// of the stream's first Pos tokens it resumes the stream at Pos.
type Checkpoint struct {
	Pos  int
	Blob []byte
}

// PartialCuts is implemented by engines whose models may keep partial
// state; the prefix cache uses it to cut only where a cut is valid and to
// resume from checkpoints elsewhere. Engines without it (the fakes) are
// taken to cut anywhere. Owner goroutine, as Engine.
type PartialCuts interface {
	// MinCut is the shortest length seq may be cut or copied to with its
	// state whole; any length from it to SeqLen is valid. Above SeqLen
	// when the sequence cannot even be continued at its end.
	MinCut(seq int32) int
	// CheckpointPositions lists where the engine took checkpoints of seq
	// as lanes prefilled it, ascending.
	CheckpointPositions(seq int32) ([]int, error)
	// TakeCheckpoints hands over those of seq's checkpoints whose Pos is in
	// want (ascending) and forgets them all: the caller chooses by
	// position which ones to keep before any blob is copied.
	TakeCheckpoints(seq int32, want []int) ([]Checkpoint, error)
	// RestoreCheckpoint resumes seq at cp.Pos: seq holds at least cp.Pos
	// tokens of cp's stream (copied or imported); its partial state becomes
	// cp's and everything from cp.Pos on is cut. On failure seq is empty.
	RestoreCheckpoint(seq int32, cp Checkpoint) error
}
