package bench

import "strings"

// protocol is the request and answer shape an endpoint speaks.
type protocol int

const (
	protoCompletions protocol = iota // OpenAI /v1/completions (suffix: FIM)
	protoChat                        // OpenAI /v1/chat/completions
	protoInfill                      // llama.cpp /infill
	protoGenerate                    // Ollama /api/generate (suffix: FIM)
	protoOllamaChat                  // Ollama /api/chat
)

// endpoint is a route and the protocol it speaks.
type endpoint struct {
	proto protocol
	path  string
}

var (
	epCompletions = endpoint{protoCompletions, "/v1/completions"}
	epChat        = endpoint{protoChat, "/v1/chat/completions"}
	epInfill      = endpoint{protoInfill, "/infill"}
	epGenerate    = endpoint{protoGenerate, "/api/generate"}
	epOllamaChat  = endpoint{protoOllamaChat, "/api/chat"}
)

// message is one chat message.
type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// fileChunk is one entry of llama.cpp's input_extra: repository context.
type fileChunk struct {
	Filename string `json:"filename"`
	Text     string `json:"text"`
}

// work is what a request asks for, whatever protocol carries it.
type work struct {
	prompt    string      // completion prompt; for FIM the lines before the cursor
	cursor    string      // FIM: the cursor line up to the cursor
	suffix    string      // FIM: the rest of the file after the cursor
	extra     []fileChunk // FIM: other files' context
	fim       bool
	messages  []message // chat
	maxTokens int
	stream    bool
	ignoreEOS bool   // generate all maxTokens (decode, background load)
	class     string // X-Superfluid-Class
}

func (e endpoint) request(model string, w work) request {
	return request{path: e.path, body: e.body(model, w), class: w.class}
}

// body renders w in the endpoint's protocol. Every request is greedy
// (temperature 0) so its length and its work repeat from run to run.
func (e endpoint) body(model string, w work) map[string]any {
	b := map[string]any{}
	if model != "" {
		b["model"] = model
	}
	switch e.proto {
	case protoCompletions:
		b["prompt"] = w.flatPrompt()
		if w.fim {
			b["suffix"] = w.suffix
		}
		openAISampling(b, w)
	case protoChat:
		b["messages"] = w.chat()
		openAISampling(b, w)
	case protoInfill:
		infillBody(b, w)
	case protoGenerate:
		b["prompt"] = w.flatPrompt()
		if w.fim {
			b["suffix"] = w.suffix
		} else {
			b["raw"] = true // the prompt as given, no chat template
		}
		ollamaSampling(b, w)
	case protoOllamaChat:
		b["messages"] = w.chat()
		ollamaSampling(b, w)
	}
	return b
}

func openAISampling(b map[string]any, w work) {
	b["max_tokens"] = w.maxTokens
	b["temperature"] = 0
	b["stream"] = w.stream
	if w.stream {
		b["stream_options"] = map[string]any{"include_usage": true}
	}
	if w.ignoreEOS {
		b["ignore_eos"] = true // llama.cpp, vLLM, superfluid
	}
}

func ollamaSampling(b map[string]any, w work) {
	b["stream"] = w.stream
	b["options"] = map[string]any{"temperature": 0, "num_predict": w.maxTokens}
}

// infillBody is what llama.vscode and llama.vim send to /infill, except
// the t_max_prompt_ms/t_max_predict_ms time limits (they would cut a slow
// answer short and hide the latency being measured) and sampling, which is
// greedy here so idle and loaded requests generate the same lengths.
func infillBody(b map[string]any, w work) {
	extra := w.extra
	if extra == nil {
		extra = []fileChunk{}
	}
	b["input_prefix"] = w.prompt
	b["prompt"] = w.cursor
	b["input_suffix"] = w.suffix
	b["input_extra"] = extra
	b["n_predict"] = w.maxTokens
	b["top_k"] = 40
	b["top_p"] = 0.99
	b["temperature"] = 0
	b["samplers"] = []string{"top_k", "top_p", "infill"}
	b["cache_prompt"] = true
	b["stream"] = w.stream
	if w.ignoreEOS {
		b["ignore_eos"] = true
	}
}

// flatPrompt is the prompt for protocols without input_extra: the extra
// files as commented headers, then the text before the cursor.
func (w work) flatPrompt() string {
	if !w.fim {
		return w.prompt
	}
	var b strings.Builder
	for _, x := range w.extra {
		b.WriteString("# file: " + x.Filename + "\n" + x.Text + "\n\n")
	}
	b.WriteString(w.prompt + w.cursor)
	return b.String()
}

// chat is the messages, or the prompt as one user message when completion
// work falls back to a chat endpoint.
func (w work) chat() []message {
	if len(w.messages) > 0 {
		return w.messages
	}
	return []message{{Role: "user", Content: w.flatPrompt()}}
}
