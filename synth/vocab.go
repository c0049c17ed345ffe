package synth

import (
	"fmt"
	"strings"
	"sync"

	"superfluid/gguf"
)

// llama.cpp token types (tokenizer.ggml.token_type).
const (
	tokUndefined   int32 = 0
	tokNormal      int32 = 1
	tokUnknown     int32 = 2
	tokControl     int32 = 3
	tokUserDefined int32 = 4
	tokUnused      int32 = 5
	tokByte        int32 = 6
)

// specialTokens follow the merged tokens in the built-in vocabulary, with
// Qwen2.5's spelling so llama.cpp recognises the end-of-turn and
// fill-in-the-middle tokens by their text as well as by the explicit keys.
var specialTokens = []string{
	"<|endoftext|>", "<|im_start|>", "<|im_end|>",
	"<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>",
	"<|repo_name|>", "<|file_sep|>",
}

// ChatTemplate is the ChatML template of the built-in vocabulary (Qwen's,
// without its default system prompt).
const ChatTemplate = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// vocab is a model's tokenizer: the tokenizer.* metadata to write, the
// token count (rows of token_embd) and which tokens greedy decoding must
// never pick.
type vocab struct {
	kvs      []gguf.KV
	size     int
	suppress []bool
}

// builtinVocabData is the unpadded built-in vocabulary.
type builtinVocabData struct {
	tokens []string
	types  []int32
	merges []string
}

// builtinBase is the unpadded built-in vocabulary, built once: training
// the merges takes a few milliseconds.
var builtinBase = sync.OnceValue(func() builtinVocabData {
	merges, merged := trainBPE(trainingWords(), builtinVocabTotal-256-len(specialTokens))
	var v builtinVocabData
	for b := 0; b < 256; b++ {
		v.tokens = append(v.tokens, string(byteToRune[b]))
		v.types = append(v.types, tokNormal) // byte-level BPE marks its byte tokens normal
	}
	for _, t := range merged {
		v.tokens = append(v.tokens, t)
		v.types = append(v.types, tokNormal)
	}
	for _, t := range specialTokens {
		v.tokens = append(v.tokens, t)
		v.types = append(v.types, tokControl)
	}
	v.merges = merges
	return v
})

// BuiltinVocabSize is the number of real tokens in the built-in vocabulary
// (byte tokens, learned merges and special tokens), before padding.
func BuiltinVocabSize() int { return len(builtinBase().tokens) }

// builtinVocab returns the built-in vocabulary padded with unused tokens to
// padTo entries. Padding is typed UNUSED, not USER_DEFINED as Qwen's [PAD]
// tokens are, because llama.cpp scans every user-defined token while
// tokenizing and 150 000 of them would make tokenization slow.
func builtinVocab(padTo int) (*vocab, error) {
	base := builtinBase()
	n := len(base.tokens)
	if padTo < n {
		return nil, fmt.Errorf("synth: vocabulary size %d is smaller than the built-in vocabulary's %d tokens", padTo, n)
	}
	tokens := append(make([]string, 0, padTo), base.tokens...)
	types := append(make([]int32, 0, padTo), base.types...)
	for i := n; i < padTo; i++ {
		tokens = append(tokens, fmt.Sprintf("[PAD%d]", i))
		types = append(types, tokUnused)
	}
	id := func(tok string) uint32 {
		for i, t := range base.tokens {
			if t == tok {
				return uint32(i)
			}
		}
		panic("synth: built-in vocabulary lacks " + tok)
	}
	w := gguf.NewWriter() // used only to collect ordered, typed KVs
	w.Set("tokenizer.ggml.model", "gpt2")
	w.Set("tokenizer.ggml.pre", "qwen2")
	w.Set("tokenizer.ggml.tokens", tokens)
	w.Set("tokenizer.ggml.token_type", types)
	w.Set("tokenizer.ggml.merges", base.merges)
	w.Set("tokenizer.ggml.bos_token_id", id("<|endoftext|>"))
	w.Set("tokenizer.ggml.eos_token_id", id("<|im_end|>"))
	w.Set("tokenizer.ggml.eot_token_id", id("<|im_end|>"))
	w.Set("tokenizer.ggml.padding_token_id", id("<|endoftext|>"))
	w.Set("tokenizer.ggml.add_bos_token", false)
	w.Set("tokenizer.ggml.add_eos_token", false)
	w.Set("tokenizer.ggml.fim_pre_token_id", id("<|fim_prefix|>"))
	w.Set("tokenizer.ggml.fim_suf_token_id", id("<|fim_suffix|>"))
	w.Set("tokenizer.ggml.fim_mid_token_id", id("<|fim_middle|>"))
	w.Set("tokenizer.ggml.fim_pad_token_id", id("<|fim_pad|>"))
	w.Set("tokenizer.ggml.fim_rep_token_id", id("<|repo_name|>"))
	w.Set("tokenizer.ggml.fim_sep_token_id", id("<|file_sep|>"))
	w.Set("tokenizer.chat_template", ChatTemplate)
	if err := w.Err(); err != nil {
		return nil, err
	}
	return &vocab{kvs: w.KVs(), size: padTo, suppress: classify("gpt2", tokens, types)}, nil
}

// graftVocab takes the tokenizer of a vocab-only GGUF (such as llama.cpp's
// ggml-vocab-*.gguf): every tokenizer.* key is copied verbatim, and the
// model's vocabulary is exactly that file's token list.
func graftVocab(path string) (*vocab, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("synth: vocabulary: %w", err)
	}
	tokens, ok := f.Strings("tokenizer.ggml.tokens")
	if !ok || len(tokens) == 0 {
		return nil, fmt.Errorf("synth: %s has no tokenizer.ggml.tokens string array: not a vocabulary file", path)
	}
	model, ok := f.String("tokenizer.ggml.model")
	if !ok {
		return nil, fmt.Errorf("synth: %s has no tokenizer.ggml.model", path)
	}
	types, hasTypes := f.Int32s("tokenizer.ggml.token_type")
	if hasTypes && len(types) != len(tokens) {
		return nil, fmt.Errorf("synth: %s: %d token types for %d tokens", path, len(types), len(tokens))
	}
	v := &vocab{size: len(tokens), suppress: classify(model, tokens, types)}
	for _, kv := range f.KVs {
		if strings.HasPrefix(kv.Key, "tokenizer.") {
			v.kvs = append(v.kvs, kv)
		}
	}
	return v, nil
}

// classify marks the tokens greedy decoding must not produce: every token
// that is not of type NORMAL (control, end-of-generation, FIM, unknown,
// byte, unused and user-defined placeholders such as Qwen's [PAD…]) and
// every normal token whose text alone is not plain text — byte-level
// fragments of multi-byte characters and control bytes. types may be nil.
func classify(model string, tokens []string, types []int32) []bool {
	out := make([]bool, len(tokens))
	for i, tok := range tokens {
		if types != nil && types[i] != tokNormal {
			out[i] = true
			continue
		}
		switch model {
		case "gpt2":
			b, ok := decodeBytes(tok)
			out[i] = !ok || !isPlainText(b)
		case "llama":
			out[i] = !isPlainText([]byte(strings.ReplaceAll(tok, "\u2581", " ")))
		default:
			out[i] = !isPlainText([]byte(tok))
		}
	}
	return out
}
