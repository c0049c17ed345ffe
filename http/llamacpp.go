package http

import "superfluid/http/wire"

// The llama.cpp API's /completion and /infill, still served from this
// package until structured output and the refusal of unhonoured fields
// live in the request core; the rest of the API, and what llama.cpp's
// server differs in, is package superfluid/http/llamacpp.

func llamaRoutes() map[string]route {
	return map[string]route{
		"/completion": {method: "POST", kind: wire.Llama, handler: (*Server).llamaCompletion},
		"/infill":     {method: "POST", kind: wire.Llama, handler: (*Server).llamaInfill},
		// The prompt a chat request renders to (apply_template.go).
		"/apply-template": {method: "POST", kind: wire.Llama, handler: (*Server).llamaApplyTemplate},
	}
}
