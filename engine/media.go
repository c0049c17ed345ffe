package engine

// RowPrefiller prefills embedding rows — an image's, encoded by a vision
// projector — into a lane's prompt: what an engine that serves media does
// beside Tick. Its owner goroutine calls it, as it does Tick.
//
// A lane's prompt holds one placeholder token per row at the image's
// positions (the prefix cache keys them; see MediaToken), which no Prefill
// may cover: the scheduler stops a text prefill at the span and prefills
// the span with PrefillRows, in its own decode (a batch carries tokens or
// rows, never both), before the text after it.
type RowPrefiller interface {
	// RowWidth is the floats in one row (the model's input embedding width).
	RowWidth() int
	// PrefillRows prefills len(rows)/RowWidth rows at the lane's next
	// unprefilled prompt positions. The span must end before the prompt's
	// last position (the first token is sampled from a token row). A
	// refused call changes nothing and returns an *Error.
	PrefillRows(lane uint32, rows []float32) error
}
