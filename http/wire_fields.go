package http

import "superfluid/http/wire"

// The wire field sets the request types embed, under unexported names: a
// field embedded under an exported type's name puts that name in
// encoding/json's error paths ("StructuredFields.grammar"), where clients
// are told the field's own name. Each API package declares its own.
type (
	structuredFields = wire.StructuredFields
	llamaUnhonoured  = wire.LlamaUnhonoured
	toolFields       = wire.ToolFields
)
