// Package chat renders a conversation into the prompt text a model was
// trained on, using the model's own chat template: the Jinja2 string a GGUF
// file carries as tokenizer.chat_template.
//
// # Semantics
//
// Templates are written and tested by model authors against Hugging Face
// transformers' apply_chat_template, so that is the behaviour matched, byte
// for byte: Exact renders as it does, and the tests hold every real
// template in ../shared/templates to goldens Python's jinja2 rendered under
// transformers' settings (testdata/README.md):
//
//   - trim_blocks and lstrip_blocks are on, and a single trailing newline of
//     the template is dropped (Jinja's default);
//   - the template sees messages (role and content, then tool_calls as
//     OpenAI shapes them with arguments as objects, tool_call_id and name
//     when set), tools (the request's definitions, or none), documents
//     (none), add_generation_prompt, bos_token, eos_token and the request's
//     Kwargs (chat_template_kwargs);
//   - raise_exception(msg) aborts rendering with a *RaiseError carrying
//     msg; strftime_now(fmt) formats Options.Now's time;
//   - tojson is json.dumps(x, ensure_ascii=False, indent, separators,
//     sort_keys), key order kept;
//   - what transformers' ImmutableSandboxedEnvironment refuses is refused:
//     list and dict mutators (append, update, pop, …), and a for loop over
//     none or a number.
//
// Prompt (and Render) add two things for serving on top: the system fold
// below, and removing a leading BOS text the tokenizer will add anyway.
//
// The Jinja engine is github.com/ardanlabs/jinja (v1.8.0, pure Go, written
// for chat templates; later versions need Go 1.27). Where it differs from
// Python's jinja2 and the difference can be reached from outside, source.go
// rewrites the template's tags before compiling them: tojson is pointed at
// this package's encoder (the engine's ignores ensure_ascii and sorts keys
// under indent), mutator calls at a filter that refuses them, and a for
// loop's iterable through a filter that checks it. What cannot be reached
// (Python's Undefined raising when used in arithmetic, str + dict raising,
// Markup's escaping, map yielding a generator) is listed with its reason in
// deviations_test.go: 11 of 210 golden renderings, all but two of them
// conversations the reference refuses and the engine renders.
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
// template uses a construct the engine lacks, the render crossed a sandbox
// bound): the HTTP layer answers it with a 400 and keeps serving. Render never returns partial output with an
// error, and a panic inside the engine is recovered and returned as an error.
//
// Parse fails on malformed template text and on a template that cannot
// render even a single user message, so a broken template is found when a
// model is loaded rather than on its first request.
//
// # Trust
//
// Message contents are data: they are never parsed as template text, so a
// user cannot inject Jinja. The template itself is model metadata anyone
// can publish (a pulled GGUF, a --chat-template-file) and is not trusted:
// it runs sandboxed. Parse refuses source beyond its static Limits (size,
// tag size, nesting, which bound the engine's recursive parse), and every
// render counts what it does — steps (loop iterations, items, macro
// entries), recursion in stack frames, output bytes, the size and depth of
// every value built, range lengths, wall-clock time — stopping with a
// *BoundError (errors.Is ErrBound) naming the bound at the first it
// crosses. The engine has no hooks, so sandbox_source.go rewrites the
// template as the engine's scanner cuts it: bodies open with a call to the
// render's budget, prints and sets pass through checks, and the operations
// that can build more than they are given (*, +, ~, slices, range, join,
// replace, indent, str.format) are pointed at sized versions that give the
// engine's results. Parse's trial renders run under the same bounds, so a
// template that cannot greet within them is refused when the model loads.
package chat
