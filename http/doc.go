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
package http
