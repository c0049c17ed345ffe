// Package bench is a load generator for OpenAI- and llama.cpp-compatible
// inference servers (superfluid, llama-server, vLLM) and Ollama. It runs the
// scenarios the design notes' bar is stated in — decode throughput, FIM
// latency under background load, warm follow-up turns — against any of them
// over plain HTTP, so the figures compare servers rather than clients.
//
// It measures from the client side only: time to the first streamed token,
// time to the last, and what the server reports in its usage and timings
// (prompt, completion and cached tokens). Prompt text comes from a seeded
// word list, so a run is repeatable and two servers see the same text.
//
// Traffic goes only to the configured URL: the HTTP client ignores proxy
// environment variables.
package bench
