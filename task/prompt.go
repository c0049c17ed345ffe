package task

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"superfluid/engine"
	"superfluid/fim"
)

// CheckPrompt refuses an empty prompt and one that leaves no room in the
// context.
func CheckPrompt(d *engine.Descriptor, prompt []engine.Token) error {
	if len(prompt) == 0 {
		return BadParam("prompt", "the prompt is empty")
	}
	if len(prompt) >= d.Ctx {
		return ContextExceededError(len(prompt), d.Ctx)
	}
	return nil
}

// PromptBytesPerToken bounds the text a prompt may carry: a prompt of more
// than this many bytes per token of the context is refused before it is
// tokenized, so a 16 MiB body costs a length check, not a tokenizer run
// and a token array. Text in any script averages 2–6 bytes a token (CJK
// about 3 bytes a character, one or two characters a token), and a few
// vocabularies have tokens of long runs of spaces or symbols; 16 leaves
// room for all of that, so a refused prompt could not have fit the context
// anyway, while the work per request stays within 16 × n_ctx bytes.
const PromptBytesPerToken = 16

// MaxPromptBytes is the most text one prompt may carry in d's context.
func MaxPromptBytes(d *engine.Descriptor) int { return PromptBytesPerToken * max(d.Ctx, 1) }

// CheckPromptBytes refuses a prompt of n bytes that could not fit the
// context whatever its tokens (see PromptBytesPerToken).
func CheckPromptBytes(d *engine.Descriptor, field string, n int) error {
	if limit := MaxPromptBytes(d); n > limit {
		return &Error{Kind: ContextExceeded, Code: "context_length_exceeded", Param: field,
			Msg: fmt.Sprintf("the prompt is %d bytes; a context of %d tokens takes at most %d bytes of text (%d per token)", n, d.Ctx, limit, PromptBytesPerToken)}
	}
	return nil
}

// Tokenize renders text to tokens with the model's BOS rule; special-token
// text in prompts is parsed (as llama.cpp's server does). Every prompt of
// every API is tokenized here, so text too long for the context is refused
// here before the tokenizer runs.
func Tokenize(m *Model, text string, addBOS bool) ([]engine.Token, error) {
	if err := CheckPromptBytes(m.Desc, "prompt", len(text)); err != nil {
		return nil, err
	}
	toks, err := m.Text.Tokenize(text, addBOS && m.Desc.AddBOS, true)
	if errors.Is(err, engine.ErrClosed) {
		// A handler still tokenizing after the drain gave the engine back.
		return nil, ErrShutDown
	}
	if err != nil {
		return nil, BadRequest("cannot tokenize the prompt: %v", err)
	}
	return toks, nil
}

// BoundFIM cuts a fill-in-the-middle request to the text that could reach
// the prompt, before anything is tokenized: the FIM builder keeps the text
// nearest the cursor and drops the rest, so the start of the prefix and of
// the typed prompt, the end of the suffix, and the oldest extra chunks
// beyond MaxPromptBytes could never fit (see PromptBytesPerToken). Editors
// send whole files; the cut keeps their requests served while bounding the
// tokenizer's work. The count of extra chunks dropped is returned.
func BoundFIM(d *engine.Descriptor, r fim.Request) (fim.Request, int) {
	limit := MaxPromptBytes(d)
	r.Prefix = KeepTail(r.Prefix, limit)
	r.Prompt = KeepTail(r.Prompt, limit)
	r.Suffix = KeepHead(r.Suffix, limit)
	used, first := 0, len(r.Extra)
	for first > 0 && used+len(r.Extra[first-1].Text) <= limit {
		used += len(r.Extra[first-1].Text)
		first--
	}
	r.Extra = r.Extra[first:]
	return r, first
}

// KeepTail is the last n bytes of s or fewer, starting on a character.
func KeepTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	start := len(s) - n
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return s[start:]
}

// KeepHead is the first n bytes of s or fewer, ending before a character.
func KeepHead(s string, n int) string {
	if len(s) <= n {
		return s
	}
	end := n
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end]
}
