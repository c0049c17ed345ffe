// Package http serves the APIs existing clients already speak — OpenAI,
// llama.cpp's own (/completion, /infill, …), Ollama and Anthropic — on
// fasthttp, over one shared scheduler.
//
// Every handler follows the same path: decode and validate the request in
// the API's own terms (a bad request gets the API's own error shape and a
// 4xx before anything is scheduled), render it to prompt tokens (the
// model's chat template, or the FIM format of its vocabulary), submit it to
// the scheduler in the class the request names or implies, and turn the
// token stream into the API's response — streamed (SSE or NDJSON, flushed
// per token) or whole. A client that goes away cancels its request within
// a step: a failed write for a streaming one, a peek at the socket for one
// that is waiting on a whole response.
//
// This package is becoming the transport only; the API families move into
// sub-packages (http/llamacpp, http/ollama, http/openai with Responses,
// http/anthropic). An API package imports task, http/wire
// and leaf packages — never this package or another API — and exports
// Routes(h wire.Host) []wire.Route; routeTable mounts them (mounted), so
// auth, origin, body limits, model resolution and the model-kind check
// stay here. A handler is func(ctx, *task.Model) error: it decodes the
// request, builds a task.Request, starts it (task.Start; for a stream
// through h.Stream, the one stream start) and renders the events in its
// API's shape; what it needs of the server it asks h. A new API is a new
// sub-package and one line in routeTable; a new request field is decoded
// in its API's package and, when it changes generation, carried by
// task.Spec and honoured in task — refused by name (unhonoured) until then.
package http
