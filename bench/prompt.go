package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Each use of generated text draws from its own random stream, so changing
// one scenario's sizes never changes another's text, and the n-th request
// of a kind has the same text whatever ran before it.
const (
	streamDecode uint64 = 1 + iota
	streamSystem
	streamQuestion
	streamCode
	streamExtra
	streamCursor
	streamBackground
	streamSoak     // the soak's draw of each request's shape
	streamSoakText // and of its text
)

// newRand returns the generator for item index of stream under seed.
func newRand(seed, stream, index uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, stream<<40|index))
}

func pick(r *rand.Rand) string { return wordList[r.IntN(len(wordList))] }

// Prose returns words words of sentence-shaped text: capitalised sentences
// of 6–15 words, a paragraph break every few sentences. Sentences rather
// than a bare word list because that is what a tokenizer and a chat
// template see in real prompts.
func Prose(seed, stream, index uint64, words int) string {
	r := newRand(seed, stream, index)
	var b strings.Builder
	sentence, paragraph := 0, 0
	for i := range words {
		w := pick(r)
		switch {
		case sentence == 0:
			if i > 0 {
				if paragraph == 0 {
					b.WriteString("\n\n")
				} else {
					b.WriteByte(' ')
				}
			}
			b.WriteString(strings.ToUpper(w[:1]) + w[1:])
			sentence = 6 + r.IntN(10)
		default:
			b.WriteByte(' ')
			b.WriteString(w)
		}
		sentence--
		if sentence == 0 || i == words-1 {
			b.WriteByte('.')
			sentence = 0
			paragraph = (paragraph + 1) % (3 + r.IntN(4))
		}
	}
	return b.String()
}

// Question returns a short user message (about a dozen words).
func Question(seed, stream, index uint64) string {
	r := newRand(seed, stream, index)
	return fmt.Sprintf("Please explain how the %s %s can %s the %s, in a few words about the %s.",
		pick(r), pick(r), pick(r), pick(r), pick(r))
}

// CodeLines returns n lines of Python-shaped source: small functions with
// names, arguments, arithmetic and branches, the texture an editor's FIM
// request carries.
func CodeLines(seed, stream, index uint64, n int) []string {
	r := newRand(seed, stream, index)
	lines := make([]string, 0, n+6)
	for len(lines) < n {
		a, b, v := pick(r), pick(r), pick(r)
		if a == b {
			b += "_2"
		}
		lines = append(lines,
			fmt.Sprintf("def %s_%s(%s, %s):", pick(r), pick(r), a, b),
			fmt.Sprintf("    %s = %s + %d", v, a, r.IntN(100)),
			fmt.Sprintf("    if %s > %s:", v, b),
			fmt.Sprintf("        return %s * %d", v, 2+r.IntN(9)),
			fmt.Sprintf("    return %s - %s", b, v),
			"",
		)
	}
	return lines[:n]
}

// cursorLine is the unfinished line a FIM request is made at; index makes
// every request distinct, so no server answers one from a completion cache.
func cursorLine(seed, index uint64) string {
	r := newRand(seed, streamCursor, index)
	return fmt.Sprintf("    %s_%d = %s_%s(", pick(r), index, pick(r), pick(r))
}

// sizer turns token targets into word and line counts. Its rates start as
// estimates for a BPE tokenizer and are replaced by the server's own
// tokenizer's when it has /tokenize (a byte-level vocabulary spends several
// tokens on each word). The estimates are Qwen2.5's rates on this text.
type sizer struct {
	TokensPerWord float64 `json:"tokens_per_word"`
	TokensPerLine float64 `json:"tokens_per_code_line"`
	Calibrated    bool    `json:"calibrated"`
}

func defaultSizer() sizer { return sizer{TokensPerWord: 1.1, TokensPerLine: 7} }

func (s sizer) words(tokens int) int {
	return max(1, int(math.Round(float64(tokens)/s.TokensPerWord)))
}

func (s sizer) lines(tokens int) int {
	return max(1, int(math.Round(float64(tokens)/s.TokensPerLine)))
}

// calibration samples: big enough that the rate is stable, small enough to
// tokenize in milliseconds.
const calibrationWords, calibrationLines = 400, 60

func calibrationProse() string { return Prose(0, 0, 0, calibrationWords) }

func calibrationCode() string { return strings.Join(CodeLines(0, 0, 0, calibrationLines), "\n") }
