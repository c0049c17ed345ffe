package fim

import (
	"strings"

	"superfluid/engine"
)

// Family is a FIM prompt format, named after the models trained on it.
type Family int

const (
	// None: the vocabulary cannot fill in the middle.
	None Family = iota
	// Generic: FIM tokens whose texts belong to no family below. They are
	// laid out as llama-server does by default (PSM, repository-level
	// context where a file separator exists).
	Generic
	// Qwen: Qwen2.5-Coder, <|fim_prefix|>…, with <|repo_name|> and
	// <|file_sep|> for repository-level context.
	Qwen
	// StarCoder: StarCoder/StarCoder2 (also Granite, CodeQwen1.5),
	// <fim_prefix>…, with StarCoder2's <repo_name>/<file_sep> layout.
	StarCoder
	// CodeLlama: ▁<PRE> ▁<SUF> ▁<MID>.
	CodeLlama
	// DeepSeek: DeepSeek-Coder, <｜fim▁begin｜> <｜fim▁hole｜> <｜fim▁end｜>.
	DeepSeek
	// Mistral: Codestral, [SUFFIX]…[PREFIX]… (suffix first).
	Mistral
)

var familyNames = [...]string{"none", "generic", "qwen", "starcoder", "codellama", "deepseek", "mistral"}

// String names the family as logs and /props show it.
func (f Family) String() string {
	if f < 0 || int(f) >= len(familyNames) {
		return "unknown"
	}
	return familyNames[f]
}

// Order is where the suffix goes relative to the prefix.
type Order int

const (
	// PSM: prefix, suffix, middle — what nearly every model was trained on.
	PSM Order = iota
	// SPM: suffix, prefix, middle — Codestral. Putting the suffix first lets
	// the prefix run straight into the generated middle.
	SPM
)

// String returns "psm" or "spm".
func (o Order) String() string {
	if o == SPM {
		return "spm"
	}
	return "psm"
}

// repoStyle is how a family lays out repository-level context.
type repoStyle int

const (
	noRepo repoStyle = iota
	// repoQwen: <|repo_name|>name\n <|file_sep|>path\ntext … <|file_sep|>path\n
	// then the FIM part (Qwen2.5-Coder report, arXiv:2409.12186; llama.cpp).
	repoQwen
	// repoStarCoder: <repo_name>name <file_sep>path\ntext … <file_sep>
	// <fim_prefix>path\nprefix… (StarCoder2 report, arXiv:2402.19173): the
	// current file's path opens the prefix.
	repoStarCoder
)

// spec is what the package knows of one family: the texts of its tokens
// (to recognise it and to find the ids llama.cpp's loader leaves out) and
// how its prompt is arranged.
type spec struct {
	family                       Family
	pre, suf, mid, pad, rep, sep string // token texts; "" where the family has none
	order                        Order
	// midMarker: the prompt ends with the middle marker. Codestral's does
	// not: mistral-common encodes <s>[SUFFIX]suffix[PREFIX]prefix and the
	// model continues the prefix.
	midMarker bool
	repo      repoStyle
	template  string // Ollama-style template; "" renders one from the token texts
}

// specs lists the known families. Texts are compared after normalize, so
// CodeLlama's "▁<PRE>" matches "<PRE>".
var specs = []spec{
	{family: Qwen, pre: "<|fim_prefix|>", suf: "<|fim_suffix|>", mid: "<|fim_middle|>",
		pad: "<|fim_pad|>", rep: "<|repo_name|>", sep: "<|file_sep|>",
		midMarker: true, repo: repoQwen},
	{family: StarCoder, pre: "<fim_prefix>", suf: "<fim_suffix>", mid: "<fim_middle>",
		pad: "<fim_pad>", rep: "<repo_name>", sep: "<file_sep>",
		midMarker: true, repo: repoStarCoder},
	{family: CodeLlama, pre: "<PRE>", suf: "<SUF>", mid: "<MID>", midMarker: true,
		template: "{{- if .Suffix }}<PRE> {{ .Prompt }} <SUF>{{ .Suffix }} <MID>{{- else }}{{ .Prompt }}{{- end }}"},
	{family: DeepSeek, pre: "<｜fim▁begin｜>", suf: "<｜fim▁hole｜>", mid: "<｜fim▁end｜>", midMarker: true},
	{family: Mistral, pre: "[PREFIX]", suf: "[SUFFIX]", mid: "[MIDDLE]", order: SPM,
		template: "{{- if .Suffix }}[SUFFIX]{{ .Suffix }}[PREFIX] {{ .Prompt }}{{- else }}{{ .Prompt }}{{- end }}"},
	// SantaCoder's hyphenated tokens, which llama.cpp also knows.
	{family: Generic, pre: "<fim-prefix>", suf: "<fim-suffix>", mid: "<fim-middle>", pad: "<fim-pad>",
		midMarker: true, repo: repoQwen},
}

// genericSpec is the layout for FIM tokens of unknown texts.
var genericSpec = spec{family: Generic, midMarker: true, repo: repoQwen}

// normalize strips the word-boundary mark a SentencePiece vocabulary puts
// on some special tokens ("▁<PRE>"), in raw ("▁") or decoded (" ") form.
func normalize(text string) string {
	if t, ok := strings.CutPrefix(text, "▁"); ok {
		return t
	}
	return strings.TrimPrefix(text, " ")
}

// specByPrefix returns the family whose prefix marker has this text.
func specByPrefix(text string) (spec, bool) {
	text = normalize(text)
	for _, s := range specs {
		if s.pre == text {
			return s, true
		}
	}
	return spec{}, false
}

// scanVocab finds, in one pass over the vocabulary, the ids of every token
// text some family names. First occurrence wins, as in llama.cpp.
func scanVocab(n int, text func(engine.Token) string) map[string]engine.Token {
	want := make(map[string]bool)
	for _, s := range specs {
		for _, t := range [...]string{s.pre, s.suf, s.mid, s.pad, s.rep, s.sep} {
			if t != "" {
				want[t] = true
			}
		}
	}
	found := make(map[string]engine.Token)
	for id := 0; id < n; id++ {
		t := normalize(text(engine.Token(id)))
		if _, seen := found[t]; want[t] && !seen {
			found[t] = engine.Token(id)
		}
	}
	return found
}

// resolve decides the family and completes the FIM ids. The ids given win
// (they come from llama.cpp's loader or the GGUF metadata); missing ones are
// filled from the vocabulary when its size is known, so Codestral and
// StarCoder2's repository tokens work although llama.cpp names neither.
func resolve(f engine.FIM, n int, text func(engine.Token) string) (spec, engine.FIM) {
	var found map[string]engine.Token
	if n > 0 && (f.Prefix < 0 || f.Suffix < 0 || f.Middle < 0 || f.Pad < 0 || f.RepoName < 0 || f.FileSep < 0) {
		found = scanVocab(n, text)
	}
	s, ok := spec{}, false
	if f.Prefix >= 0 {
		s, ok = specByPrefix(text(f.Prefix))
	} else {
		for _, c := range specs {
			if _, has := found[c.pre]; has {
				s, ok = c, true
				break
			}
		}
	}
	if !ok {
		s = genericSpec
	}
	fill := func(id *engine.Token, t string) {
		if v, has := found[t]; *id < 0 && t != "" && has {
			*id = v
		}
	}
	fill(&f.Prefix, s.pre)
	fill(&f.Suffix, s.suf)
	fill(&f.Middle, s.mid)
	fill(&f.Pad, s.pad)
	fill(&f.RepoName, s.rep)
	fill(&f.FileSep, s.sep)
	return s, f
}
