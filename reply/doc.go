// Package reply reads what a chat model generates as the three things it
// may hold — reasoning, the answer's content, and tool calls — in the
// syntax the model's chat template taught it, and states the grammar that
// holds the model to that syntax when a client requires a call.
//
// # Formats come from the template
//
// Detect probes a template: it renders a conversation with and without
// tools, with an assistant turn carrying one call and two, and with a
// reasoning block, and compares the renderings to find how the template
// writes a call and a reasoning block (probe.go). Each known call syntax
// is then asked to read the probe's call back; the first that reads back
// exactly the call that was rendered is the format. The syntaxes come in
// families, one a file: JSON objects between markers (jsonsyntax.go:
// Hermes, Llama 3.x, Mistral Nemo, Command R, Granite, Apriel, …), a name
// between markers then JSON arguments (namedjson.go: Functionary,
// Mistral Small 3.2, Solar Open, DeepSeek V3.1), Python calls
// (pythonic.go: LFM2; pythontag.go: Llama 3.1's builtin tools), and
// markup (markup.go, xml*.go, harmony.go, kimi.go). A template that
// renders no calls but names its syntax in its text is read from a short
// table (described.go). One that does neither gets the generic format:
// the tools and the reply syntax are described to the model in the
// system turn (Generic, SystemPrompt).
//
// # Parsing as it streams
//
// A Parser is fed the generated text in whatever pieces the engine
// produced and returns Events. Text that could still be the start of a
// marker is held back until it is known not to be, so a call marker never
// reaches Content. A call block is held whole until it closes, then parsed:
// a block that does not parse, or names a tool the request did not
// declare, is returned as Content and reported through Options.Warn — a
// malformed call never fails a reply. The events of a text do not depend
// on how it was split.
package reply
