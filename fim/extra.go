package fim

import (
	"strings"

	"superfluid/engine"
)

// Placeholders llama.cpp uses where the editor names nothing; keeping them
// makes our prompts match what users of llama-server are used to.
const (
	defaultRepo     = "myproject"
	defaultFilename = "filename"
	defaultChunk    = "tmp"
)

// snippetSep precedes each extra chunk when the vocabulary has no file
// separator (llama.cpp's k_chunk_prefix_str).
const snippetSep = "\n\n--- snippet ---\n\n"

// extraContext is the repository-level context of one prompt.
type extraContext struct {
	head     []engine.Token // before the first marker
	inPrefix []engine.Token // right after the prefix marker (StarCoder2's path)
	kept     int            // chunks kept
	dropped  int            // chunks dropped
	repo     bool           // the repository-level layout is in use
}

func (c extraContext) tokens() int { return len(c.head) + len(c.inPrefix) }

// extra builds the context in at most room tokens. The frame (repository
// name and current file) must fit first; then chunks are taken from the
// last backwards while they fit whole, so the ones kept are the most recent
// and stay a contiguous run — a prompt prefix that repeats across requests,
// which is what the prefix cache reuses.
func (b *Builder) extra(tok Tokenizer, r Request, room int) (extraContext, error) {
	if b.RepoLevel() && (len(r.Extra) > 0 || r.RepoName != "" || r.Filename != "") {
		return b.repoContext(tok, r, room)
	}
	if len(r.Extra) == 0 {
		return extraContext{}, nil
	}
	var sep []engine.Token
	ctx, err := chunks(r.Extra, room, func(f File) ([]engine.Token, error) {
		var err error
		if sep == nil {
			if sep, err = tokenize(tok, "snippet separator", snippetSep); err != nil {
				return nil, err
			}
		}
		text, err := tokenize(tok, "extra text", f.Text)
		return join(sep, text), err
	})
	return ctx, err
}

// repoContext lays out Qwen's or StarCoder2's repository-level format.
func (b *Builder) repoContext(tok Tokenizer, r Request, room int) (extraContext, error) {
	repo, file := orDefault(r.RepoName, defaultRepo), orDefault(r.Filename, defaultFilename)
	star := b.spec.repo == repoStarCoder
	var head, inPrefix []engine.Token
	if b.ids.RepoName >= 0 {
		name := repo + "\n"
		if star {
			name = repo
		}
		t, err := tokenize(tok, "repository name", name)
		if err != nil {
			return extraContext{}, err
		}
		head = join([]engine.Token{b.ids.RepoName}, t)
	}
	cur, err := tokenize(tok, "filename", file+"\n")
	if err != nil {
		return extraContext{}, err
	}
	tail := []engine.Token{b.ids.FileSep}
	if star {
		inPrefix = cur
	} else {
		tail = append(tail, cur...)
	}
	frame := len(head) + len(tail) + len(inPrefix)
	if frame > room {
		return extraContext{dropped: len(r.Extra)}, nil
	}
	ctx, err := chunks(r.Extra, room-frame, func(f File) ([]engine.Token, error) {
		name, err := tokenize(tok, "extra filename", orDefault(f.Name, defaultChunk)+"\n")
		if err != nil {
			return nil, err
		}
		text := f.Text
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n" // the next <|file_sep|> starts a line, as in training
		}
		body, err := tokenize(tok, "extra text", text)
		return join([]engine.Token{b.ids.FileSep}, name, body), err
	})
	if err != nil {
		return extraContext{}, err
	}
	ctx.head = join(head, ctx.head, tail)
	ctx.inPrefix = inPrefix
	ctx.repo = true
	return ctx, nil
}

// chunks tokenizes files from the last backwards and keeps them while they
// fit in room; the first that does not ends the run (and the tokenizing).
func chunks(files []File, room int, render func(File) ([]engine.Token, error)) (extraContext, error) {
	var rev [][]engine.Token
	used, i := 0, len(files)
	for ; i > 0; i-- {
		t, err := render(files[i-1])
		if err != nil {
			return extraContext{}, err
		}
		if used+len(t) > room {
			break
		}
		rev = append(rev, t)
		used += len(t)
	}
	head := make([]engine.Token, 0, used)
	for j := len(rev) - 1; j >= 0; j-- {
		head = append(head, rev[j]...)
	}
	return extraContext{head: head, kept: len(rev), dropped: i}, nil
}

// join concatenates token runs into a new slice.
func join(parts ...[]engine.Token) []engine.Token {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]engine.Token, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
