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
// writes a call and a reasoning block. Each known call syntax (syntax.go)
// is then asked to read the probe's call back; the first that reads back
// exactly the call that was rendered is the format. A template that
// renders no call at all gets the generic format: the tools and the reply
// syntax are described to the model in the system turn (Generic).
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
