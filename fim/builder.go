package fim

import (
	"errors"
	"fmt"
	"strings"

	"superfluid/engine"
)

var (
	// ErrNoFIM: the vocabulary lacks the tokens of a FIM format, so the
	// model cannot fill in the middle (a chat or base model without FIM
	// training). Servers answer FIM requests for it with a 4xx/501.
	ErrNoFIM = errors.New("fim: the model's vocabulary has no fill-in-the-middle tokens")
	// ErrBudget: the budget cannot hold even the format's markers.
	ErrBudget = errors.New("fim: budget too small for the FIM format")
)

// Config describes the model a Builder formats for.
type Config struct {
	// FIM holds the ids llama.cpp's loader found (engine.Descriptor.FIM),
	// -1 where it found none.
	FIM engine.FIM
	// TokenText returns a token's text: the vocabulary entry
	// (tokenizer.ggml.tokens) or its piece with special tokens rendered.
	// The family is recognised from these texts. Required.
	TokenText func(engine.Token) string
	// NumTokens is the vocabulary size (engine.Descriptor.Vocab). When set,
	// FIM tokens missing from FIM are looked up by text — llama.cpp does not
	// name Codestral's [PREFIX]/[SUFFIX] nor StarCoder2's
	// <repo_name>/<file_sep>. Zero skips the lookup.
	NumTokens int
	// BOS is put first when AddBOS is set (engine.Descriptor.BOS, .AddBOS).
	BOS    engine.Token
	AddBOS bool
}

// validate rejects a Config that cannot describe a model.
func (c Config) validate() error {
	if c.TokenText == nil {
		return errors.New("fim: Config.TokenText is nil")
	}
	if c.NumTokens < 0 {
		return fmt.Errorf("fim: Config.NumTokens %d is negative", c.NumTokens)
	}
	if c.AddBOS && (c.BOS < 0 || (c.NumTokens > 0 && int(c.BOS) >= c.NumTokens)) {
		return fmt.Errorf("fim: Config.AddBOS with BOS id %d outside the vocabulary", c.BOS)
	}
	f := c.FIM
	for _, id := range [...]engine.Token{f.Prefix, f.Suffix, f.Middle, f.Pad, f.RepoName, f.FileSep} {
		if id < -1 || (c.NumTokens > 0 && int(id) >= c.NumTokens) {
			return fmt.Errorf("fim: FIM token id %d outside the vocabulary of %d", id, c.NumTokens)
		}
	}
	return nil
}

// Builder formats FIM prompts for one model. It holds no per-request state
// and is safe for concurrent use.
type Builder struct {
	spec     spec
	ids      engine.FIM
	bos      engine.Token
	addBOS   bool
	capable  bool
	template string
}

// NewBuilder recognises the model's FIM format from its vocabulary. A bad
// Config returns a nil Builder. A vocabulary that cannot FIM returns an
// error wrapping ErrNoFIM together with a usable Builder whose Capable is
// false, so the server can still answer /api/show (with a template lacking
// .Suffix, which tells Continue not to send FIM requests).
func NewBuilder(c Config) (*Builder, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	s, ids := resolve(c.FIM, c.NumTokens, c.TokenText)
	b := &Builder{spec: s, ids: ids, bos: c.BOS, addBOS: c.AddBOS}
	if b.spec.repo == repoStarCoder && ids.RepoName >= 0 && normalize(c.TokenText(ids.RepoName)) != s.rep {
		// CodeQwen1.5 pairs <fim_prefix> with <reponame>/<file_sep> but
		// puts a newline after the repository name, as Qwen does.
		b.spec.repo = repoQwen
	}
	b.capable = ids.Prefix >= 0 && ids.Suffix >= 0 && ids.Prefix != ids.Suffix &&
		(!s.midMarker || (ids.Middle >= 0 && ids.Middle != ids.Prefix && ids.Middle != ids.Suffix))
	if !b.capable {
		b.spec = spec{family: None}
		b.template = "{{ .Prompt }}"
		return b, fmt.Errorf("%w (prefix %d, suffix %d, middle %d)", ErrNoFIM, ids.Prefix, ids.Suffix, ids.Middle)
	}
	b.template = s.template
	if b.template == "" {
		b.template = renderTemplate(c.TokenText(ids.Prefix), c.TokenText(ids.Suffix), c.TokenText(ids.Middle))
	}
	return b, nil
}

// FromDescriptor is NewBuilder for an open engine.
func FromDescriptor(d *engine.Descriptor, tokenText func(engine.Token) string) (*Builder, error) {
	return NewBuilder(Config{FIM: d.FIM, TokenText: tokenText, NumTokens: d.Vocab, BOS: d.BOS, AddBOS: d.AddBOS})
}

// Capable reports whether the model can fill in the middle.
func (b *Builder) Capable() bool { return b.capable }

// Family is the recognised format (None when not Capable).
func (b *Builder) Family() Family { return b.spec.family }

// Order is PSM or SPM.
func (b *Builder) Order() Order { return b.spec.order }

// RepoLevel reports whether other files are laid out with repository and
// file-separator tokens; without them they are joined as llama.cpp does,
// each after a "--- snippet ---" line.
func (b *Builder) RepoLevel() bool {
	return b.capable && b.spec.repo != noRepo && b.ids.FileSep >= 0
}

// Tokens returns the FIM ids in use, including those found by text.
func (b *Builder) Tokens() engine.FIM { return b.ids }

// StopTokens lists the format's tokens that should end a FIM completion:
// a model that emits a marker, pad, repository or file separator has
// finished the middle and started inventing the next training example.
// llama.cpp stops on pad, repository and separator only where it named them.
func (b *Builder) StopTokens() []engine.Token {
	if !b.capable {
		return nil
	}
	var out []engine.Token
	for _, id := range [...]engine.Token{b.ids.Prefix, b.ids.Suffix, b.ids.Middle, b.ids.Pad, b.ids.RepoName, b.ids.FileSep} {
		if id >= 0 {
			out = append(out, id)
		}
	}
	return out
}

// Template renders the format as an Ollama Go text/template over .Prompt
// (the prefix) and .Suffix; a prompt without a suffix is passed through.
// Ollama's /api/show returns it, and clients such as Continue enable FIM
// only when it mentions .Suffix — so a model that cannot FIM gets
// "{{ .Prompt }}". The server builds prompts with Build, not with this.
func (b *Builder) Template() string { return b.template }

// renderTemplate writes a PSM template from marker texts of unknown
// families, escaping any "{{" a text might hold.
func renderTemplate(pre, suf, mid string) string {
	esc := func(s string) string { return strings.ReplaceAll(s, "{{", `{{"{{"}}`) }
	return "{{- if .Suffix }}" + esc(pre) + "{{ .Prompt }}" + esc(suf) + "{{ .Suffix }}" + esc(mid) +
		"{{- else }}{{ .Prompt }}{{- end }}"
}
