// Package fim builds the fill-in-the-middle prompt a code model was trained
// on, as tokens, from what an editor sends: the text before the cursor, the
// text after it, and optionally other files of the project.
//
// Every FIM model family wants a different arrangement of the same three
// markers, and a model prompted in another family's arrangement completes
// badly rather than failing, so the arrangement is read from the model's own
// vocabulary (see Family) instead of being configured per model. The
// package works on tokens, not text, so that user text that happens to spell
// a marker ("<|fim_prefix|>" in a file about tokenizers) can never become
// one: the markers are inserted by id and the texts are tokenized with
// special-token parsing off.
//
// The behaviour follows llama.cpp's server (format_infill in
// tools/server/utils.hpp): the end of the prefix and the start of the suffix
// are kept, the prefix gets three quarters of the local window and the
// suffix one quarter, other files fill what is left of the budget and are
// laid out with <|repo_name|>/<|file_sep|> where the vocabulary has them
// (Qwen2.5-Coder's repository-level format). Where this package differs it
// says so: whole extra chunks are dropped instead of cutting one in half, the
// BOS token comes first rather than after the extra context, budget the
// extra context leaves unused goes back to the prefix and suffix, StarCoder2
// and Codestral get the layouts their authors specify, and FIM tokens
// llama.cpp's loader does not name ([PREFIX]/[SUFFIX] of Codestral,
// <repo_name>/<file_sep> of StarCoder2) are found by text.
//
// A Builder is made once per model and is safe for concurrent use.
package fim
