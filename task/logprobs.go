package task

import "superfluid/engine"

// EachTop calls f with each of t's top n alternatives (fewer when the
// engine ranked fewer), in rank order, its text rendered as every API shows
// an alternative (a special token as plain text, not its markup). piece is
// valid only during the call. This is the one reading of top logprobs;
// each API only shapes what f is given.
func EachTop(m *Model, t *TokenOut, n int, f func(tok engine.Token, piece []byte, logprob float32)) {
	var piece []byte
	for _, alt := range t.Top[:min(len(t.Top), max(n, 0))] {
		piece = m.Text.AppendPiece(piece[:0], alt.Token, false)
		f(alt.Token, piece, alt.Logprob)
	}
}
