// Package grammar turns JSON Schemas into GBNF grammars (llama.cpp's
// grammar dialect) and recognizes GBNF itself, the reference the engine's
// grammar sampler is checked against.
//
// # JSON Schema to GBNF
//
// FromJSONSchema writes a grammar whose language is a subset of the JSON
// texts of the values a schema admits, and contains at least one text of
// every such value: this package's spelling (canonicalJSON) — compact
// tokens with bounded whitespace between them, properties in the schema's
// order, numbers as plain decimals when bounded. A keyword is either stated
// exactly in the grammar or refused with an *UnsupportedError naming it;
// none is silently dropped, since a grammar that skips a keyword lets a
// model write what the schema forbids.
//
// Supported: boolean schemas; type (and type lists); enum and const (their
// values written compactly, object keys as the schema writes them); the
// number bounds minimum, maximum, exclusiveMinimum, exclusiveMaximum, exact
// for integers and for decimals (bounded numbers are written without an
// exponent); minLength and maxLength (code points); pattern (the subset
// documented in regex.go, with JSON Schema's unanchored semantics: a side
// without ^ or $ admits any characters there); format date, time,
// date-time, uuid, email and ipv4 (see formatRules; format is asserted, as
// the format-assertion vocabulary does, not merely annotated); properties,
// required, additionalProperties (a schema, or false; under Options.Strict
// an object schema that declares properties admits no others unless it
// says additionalProperties); items, prefixItems, minItems, maxItems;
// uniqueItems false; allOf (subschemas merged: types intersected, bounds
// tightened, properties merged with each side's additionalProperties
// applied to the other's properties, enums intersected); anyOf; oneOf
// where no value can match two branches (disjoint types or disjoint literal
// sets; false branches are dropped); $ref to "#" or a "#/…" JSON pointer,
// recursive references included, with $defs and definitions; OpenAPI's
// nullable. Annotations (title, description, examples, default, $comment,
// deprecated, readOnly, writeOnly, a root $id, $schema naming a published
// draft) are accepted and ignored.
//
// Refused, by keyword: every other keyword (not, if/then/else, contains,
// patternProperties, propertyNames, dependent*, unevaluated*, multipleOf,
// min/maxProperties, $anchor, $dynamicRef, content*, …); uniqueItems true;
// remote and relative references and nested $id; a recursive $ref combined
// with sibling keywords or allOf; oneOf with branches that may overlap; two
// different patterns or formats on one value; minLength/maxLength beside a
// pattern or a format, and a pattern beside a format (each would need the
// intersection of two languages); enum beside pattern, format, or object
// and array keywords; a $schema of an unknown dialect. Under draft-07 a
// $ref's siblings are ignored by the spec but merged here, which can only
// narrow the grammar. Known narrowings of supported keywords: a leap second
// only as 23:59:60 in UTC; no IPv6 literal in an email; object keys beyond
// the declared ones held to one spelling per character.
//
// # Costs
//
// Parsing and converting cost time and memory in proportion to the input:
// the bounds in limits.go (size and nesting of GBNF, schemas and patterns;
// rules expanded within one another) are checked on the text before it is
// parsed, and a work budget in proportion to a schema's size stops what
// merging its combinators multiplies out. Past one, the error is a
// *LimitError naming it. No recursion over client data goes deeper than a
// bound: what can be as deep as the input is long (chains of rules or of
// references, the trie of property names) keeps its own stack.
//
// # GBNF
//
// ParseGBNF parses the dialect llama.cpp's llama-grammar.cpp parses and
// refuses what it refuses (undefined rules, left recursion, repetition
// counts above 2000), with errors naming line and column; Grammar.Accepts
// decides membership with an Earley recognizer. The test suite runs the
// JSON Schema Test Suite through both; the grammars it produces and the
// verdicts have also been checked against llama.cpp's own parser and
// matcher (GRAMMAR_SUITE_DUMP writes them out for that).
package grammar
