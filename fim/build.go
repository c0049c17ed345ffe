package fim

import (
	"errors"
	"fmt"

	"superfluid/engine"
)

// DefaultWindow is the local window when a Request names none: llama.cpp
// fits prefix, prompt and suffix into one batch, 2048 tokens by default.
const DefaultWindow = 2048

// File is another file of the project given as context (llama.cpp's
// input_extra chunk: {filename, text}).
type File struct {
	Name string // path as the editor shows it; "" becomes "tmp" (llama.cpp)
	Text string
}

// Request is one FIM request as the HTTP layers decode it.
type Request struct {
	// Prefix and Suffix are the text before and after the cursor
	// (/infill input_prefix/input_suffix; OpenAI and Ollama prompt/suffix).
	Prefix, Suffix string
	// Prompt is /infill's prompt: text typed after the prefix. It is
	// nearest the cursor, so it is served before the prefix; only when it
	// alone exceeds the budget is its start cut.
	Prompt string
	// Extra is repository-level context, oldest first: llama.vim and
	// llama.vscode append their newest chunk last, and that order also
	// puts the most recent file nearest the cursor. When the budget is
	// short the first chunks are dropped, whole.
	Extra []File
	// RepoName and Filename (the file being edited) label repository-level
	// context; in that layout empty values become llama.cpp's placeholders
	// "myproject" and "filename". A request with neither Extra, RepoName
	// nor Filename gets the plain file-level format.
	RepoName, Filename string
	// Window is the most tokens prompt, prefix and suffix take before the
	// extra context is served; what the extra context leaves goes back to
	// them. Zero or less means DefaultWindow. A budget below the window
	// leaves nothing for the extra context, as in llama.cpp.
	Window int
}

// Tokenizer turns text into tokens without adding BOS/EOS and without
// parsing special-token texts (cgo: Tokenize(text, false, false)), so text
// that spells a marker stays text. Build calls it only from its own
// goroutine.
type Tokenizer interface {
	Tokenize(text string) ([]engine.Token, error)
}

// Info says what a Build kept and cut, for logs and the APIs' truncated
// flags.
type Info struct {
	Prefix, Suffix, Prompt int  // tokens kept of each
	PrefixDropped          int  // tokens cut from the start of the prefix
	SuffixDropped          int  // tokens cut from the end of the suffix
	PromptDropped          int  // tokens cut from the start of the prompt
	Extra                  int  // extra chunks kept (the last ones)
	ExtraDropped           int  // extra chunks dropped (the first ones)
	ExtraTokens            int  // tokens of repository context, headers included
	RepoLevel              bool // laid out with repository and file-separator tokens
}

// Truncated reports whether anything the editor sent was left out.
func (i Info) Truncated() bool {
	return i.PrefixDropped+i.SuffixDropped+i.PromptDropped+i.ExtraDropped > 0
}

// Build returns the prompt for r in at most budget tokens (the context
// minus room for the reply), BOS included. The markers always fit or
// ErrBudget is returned; the end of the prefix and the start of the suffix
// survive truncation; texts are tokenized separately, so no cut ever falls
// inside a special token.
func (b *Builder) Build(tok Tokenizer, r Request, budget int) ([]engine.Token, Info, error) {
	if !b.capable {
		return nil, Info{}, ErrNoFIM
	}
	if tok == nil {
		return nil, Info{}, errors.New("fim: nil Tokenizer")
	}
	fixed := b.fixed()
	if budget < fixed {
		return nil, Info{}, fmt.Errorf("%w: %d tokens, the markers need %d", ErrBudget, budget, fixed)
	}
	prefix, suffix, prompt, err := tokenizeLocal(tok, r)
	if err != nil {
		return nil, Info{}, err
	}
	window := r.Window
	if window <= 0 {
		window = DefaultWindow
	}
	avail := budget - fixed
	q, p, s := split(min(avail, window), len(prompt), len(prefix), len(suffix))
	ctx, err := b.extra(tok, r, avail-q-p-s)
	if err != nil {
		return nil, Info{}, err
	}
	q, p, s = split(avail-ctx.tokens(), len(prompt), len(prefix), len(suffix))
	info := Info{
		Prefix: p, Suffix: s, Prompt: q,
		PrefixDropped: len(prefix) - p, SuffixDropped: len(suffix) - s, PromptDropped: len(prompt) - q,
		Extra: ctx.kept, ExtraDropped: ctx.dropped, ExtraTokens: ctx.tokens(), RepoLevel: ctx.repo,
	}
	parts := layout{
		extra:  ctx.head,
		prefix: [][]engine.Token{ctx.inPrefix, prefix[len(prefix)-p:], prompt[len(prompt)-q:]},
		suffix: suffix[:s],
	}
	return b.assemble(parts, fixed+q+p+s+ctx.tokens()), info, nil
}

// fixed counts the tokens every prompt of this format carries.
func (b *Builder) fixed() int {
	n := 2 // prefix and suffix markers
	if b.spec.midMarker {
		n++
	}
	if b.addBOS {
		n++
	}
	return n
}

// split shares total tokens among the prompt (first: it is nearest the
// cursor), then prefix and suffix at 3:1 as llama.cpp does; a side that
// needs less than its share leaves the rest to the other. Each result is
// nondecreasing in total, so a second call with what the extra context left
// only ever adds tokens.
func split(total, nPrompt, nPrefix, nSuffix int) (q, p, s int) {
	total = max(total, 0)
	q = min(nPrompt, total)
	rest := total - q
	s = min(nSuffix, rest/4)
	p = min(nPrefix, rest-s)
	s = min(nSuffix, rest-p)
	return q, p, s
}

// layout is a prompt's content before the markers are placed.
type layout struct {
	extra  []engine.Token   // before the first marker
	prefix [][]engine.Token // after the prefix marker, in order
	suffix []engine.Token   // after the suffix marker
}

// assemble places the markers: BOS, extra context, then
// PSM: PRE prefix SUF suffix MID, or SPM: SUF suffix PRE prefix [MID].
func (b *Builder) assemble(l layout, n int) []engine.Token {
	out := make([]engine.Token, 0, n)
	if b.addBOS {
		out = append(out, b.bos)
	}
	out = append(out, l.extra...)
	pre := func() {
		out = append(out, b.ids.Prefix)
		for _, part := range l.prefix {
			out = append(out, part...)
		}
	}
	suf := func() {
		out = append(out, b.ids.Suffix)
		out = append(out, l.suffix...)
	}
	if b.spec.order == SPM {
		suf()
		pre()
	} else {
		pre()
		suf()
	}
	if b.spec.midMarker {
		out = append(out, b.ids.Middle)
	}
	return out
}

// tokenizeLocal tokenizes the text around the cursor.
func tokenizeLocal(tok Tokenizer, r Request) (prefix, suffix, prompt []engine.Token, err error) {
	if prefix, err = tokenize(tok, "prefix", r.Prefix); err != nil {
		return nil, nil, nil, err
	}
	if suffix, err = tokenize(tok, "suffix", r.Suffix); err != nil {
		return nil, nil, nil, err
	}
	prompt, err = tokenize(tok, "prompt", r.Prompt)
	return prefix, suffix, prompt, err
}

// tokenize wraps tokenizer errors with what was being tokenized.
func tokenize(tok Tokenizer, what, text string) ([]engine.Token, error) {
	if text == "" {
		return nil, nil
	}
	t, err := tok.Tokenize(text)
	if err != nil {
		return nil, fmt.Errorf("fim: tokenize %s: %w", what, err)
	}
	return t, nil
}
