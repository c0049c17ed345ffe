package chat

import "superfluid/gguf"

// Metadata keys FromGGUF reads.
const (
	keyTemplate = "tokenizer.chat_template"
	keyTokens   = "tokenizer.ggml.tokens"
	keyBOS      = "tokenizer.ggml.bos_token_id"
	keyEOS      = "tokenizer.ggml.eos_token_id"
	keyAddBOS   = "tokenizer.ggml.add_bos_token"
)

// FromGGUF returns the chat template a model file carries and the Options
// its tokenizer metadata gives: the BOS and EOS token text, and
// TokenizerAddsBOS from tokenizer.ggml.add_bos_token. When that key is
// absent llama.cpp decides by vocabulary type, so a caller holding the
// loaded vocabulary should overwrite TokenizerAddsBOS from it. ok is false
// when the file has no template; fall back to ChatML then.
func FromGGUF(f *gguf.File) (src string, opts Options, ok bool) {
	src, ok = f.String(keyTemplate)
	tokens, _ := f.Strings(keyTokens)
	opts.BOS = tokenText(f, tokens, keyBOS)
	opts.EOS = tokenText(f, tokens, keyEOS)
	opts.TokenizerAddsBOS, _ = f.Bool(keyAddBOS)
	return src, opts, ok && src != ""
}

// tokenText returns the text of the token whose id is stored under key, or
// "" when the id is missing or out of range.
func tokenText(f *gguf.File, tokens []string, key string) string {
	id, ok := f.Uint32(key)
	if !ok || int(id) >= len(tokens) {
		return ""
	}
	return tokens[id]
}
