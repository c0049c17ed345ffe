// Package bench is a load generator for OpenAI- and llama.cpp-compatible
// inference servers (superfluid, llama-server, vLLM) and Ollama. It runs the
// scenarios the design notes' bar is stated in — decode throughput, FIM
// latency under background load, warm follow-up turns — against any of them
// over plain HTTP, so the figures compare servers rather than clients. The
// soak scenario is not a measurement but a trial: hostile mixed traffic on
// every API, judged by what the server must never do (undocumented 5xx,
// crash, lanes left busy, memory growth).
//
// A failed request is never left out silently: the report counts the
// failures and names the first, and a run with any has not met its target.
//
// It measures from the client side only: time to the first streamed token,
// time to the last, and what the server reports in its usage and timings
// (prompt, completion and cached tokens). Prompt text comes from a seeded
// word list, so a run is repeatable and two servers see the same text.
//
// Traffic goes only to the configured URL (and fim-under-load's background
// load to its BackgroundURL): the HTTP client ignores proxy environment
// variables.
package bench
