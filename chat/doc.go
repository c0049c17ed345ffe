// Package chat renders a conversation into the prompt text a model was
// trained on, using the model's own chat template: the Jinja2 string a GGUF
// file carries as tokenizer.chat_template.
//
// # Semantics
//
// Templates are written and tested by model authors against HuggingFace
// transformers' apply_chat_template, so that is the behaviour matched here,
// byte for byte where it matters:
//
//   - trim_blocks and lstrip_blocks are on (transformers turns both on), and
//     a single trailing newline of the template is dropped (Jinja's default);
//   - the template sees messages (a list of {role, content} mappings, keys in
//     that order), add_generation_prompt, bos_token, eos_token, and tools and
//     documents set to none, as transformers passes them when a request has
//     none;
//   - raise_exception(msg) aborts rendering; Render returns a *RaiseError
//     carrying msg.
//
// The Jinja engine is github.com/ardanlabs/jinja (v1.8.0, pure Go, no
// dependencies), written for exactly this job and tested by its authors
// against Python Jinja2 configured as transformers configures it.
//
// # System messages
//
// Some templates refuse a system message (Gemma and Mistral v0.1 raise an
// exception) and some silently drop it (Phi-3). Clients of the OpenAI API
// send a system message with nearly every request, so neither an error nor
// a lost instruction is acceptable. Parse therefore probes the template once
// with a system message, and when the message's text does not come out,
// Render folds system messages into the user message that follows them, as
// llama.cpp does: consecutive system texts are joined with "\n" and put in
// front of the next user message's content, separated by "\n"; a system
// message followed by anything but a user message becomes a user message of
// its own. SupportsSystemRole reports what the probe found.
//
// # Errors
//
// Every error Render returns means the conversation cannot be rendered with
// this template (the template raised an exception, a role is unknown, the
// template uses a construct the engine lacks): the HTTP layer answers it with
// a 400 and keeps serving. Render never returns partial output with an
// error, and a panic inside the engine is recovered and returned as an error.
//
// Parse fails on malformed template text and on a template that cannot
// render even a single user message, so a broken template is found when a
// model is loaded rather than on its first request.
//
// # Trust
//
// Message contents are data: they are never parsed as template text, so a
// user cannot inject Jinja. The template itself is model metadata and is
// trusted to terminate; rendering has no time or memory limit of its own.
package chat
