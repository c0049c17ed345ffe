package llamacpp

import "bytes"

// Why a lineGuard ended a completion.
const (
	guardIndent = "n_indent"
	guardTime   = "t_max_predict_ms"
)

// lineGuard applies llama.cpp's two line rules to generated text as it
// streams, so that streamed and whole answers end at the same byte.
//
// n_indent: every line after the first must be indented by at least
// n_indent spaces or tabs (an editor completing a block wants nothing past
// its end). The first line that is not ends the completion, cut where its
// text starts; its newline and indentation are kept, as llama.cpp keeps
// them, and an empty line counts as not indented.
//
// t_max_predict_ms: once the generation is overtime, it ends with the
// piece of text that holds the next newline, so the editor gets whole
// lines.
type lineGuard struct {
	nIndent  int
	checking bool // inside the indentation of a line after a newline
	indent   int
}

// push returns the part of text that stays and, when the completion must
// end here, which rule ended it.
func (g *lineGuard) push(text []byte, overtime bool) (keep []byte, stop string) {
	for i, c := range text {
		if g.checking {
			if c == ' ' || c == '\t' {
				g.indent++
				continue
			}
			g.checking = false
			if g.indent < g.nIndent {
				return text[:i], guardIndent
			}
		}
		if c == '\n' && g.nIndent > 0 {
			g.checking, g.indent = true, 0
		}
	}
	if overtime && bytes.IndexByte(text, '\n') >= 0 {
		return text, guardTime
	}
	return text, ""
}
