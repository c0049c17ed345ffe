package http

// The llama.cpp API's /apply-template, still served from this package
// while it reads OpenAI's messages; the rest of the API is package
// superfluid/http/llamacpp.

func llamaRoutes() map[string]route {
	return map[string]route{
		// The prompt a chat request renders to (apply_template.go).
		"/apply-template": {method: "POST", kind: apiLlama, handler: (*Server).llamaApplyTemplate},
	}
}
