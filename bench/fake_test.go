package bench

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeServer speaks just enough OpenAI, llama.cpp and Ollama for the
// scenarios: a token is a whitespace-separated word, every reply is
// maxTokens words "tok", and the cache is the longest word prefix shared
// with any earlier prompt plus reply.
type fakeServer struct {
	*httptest.Server
	noInfill, noCompletions bool
	blockBackground         bool   // long background requests wait for the client to go
	tokensPerWord           int    // /tokenize; 0: no /tokenize
	modelID                 string // what /v1/models lists; empty: fake-model
	// hook runs in each generation request's handler before it answers.
	hook func(r *http.Request, bgActive int)
	// fail, when it returns a status, answers the generation request with
	// that error instead; cut, when true, ends its stream without the
	// last event. n counts the requests to the path so far (from 1).
	fail func(path string, n int, body map[string]any) int
	cut  func(path string, n int, body map[string]any) bool
	hits map[string]int

	mu       sync.Mutex
	seen     []seenRequest
	history  [][]string
	bgActive int
}

type seenRequest struct {
	path, class string
	body        map[string]any
	bgActive    int // background requests running when this one arrived
}

func newFake(t *testing.T, configure func(*fakeServer)) *fakeServer {
	f := &fakeServer{}
	if configure != nil {
		configure(f)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"status":"ok"}`) })
	if f.modelID == "" {
		f.modelID = "fake-model"
	}
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, f.modelID)
	})
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"models":[{"name":"fake:latest"}]}`) })
	mux.HandleFunc("POST /tokenize", f.tokenize)
	mux.HandleFunc("POST /v1/completions", f.generate)
	mux.HandleFunc("POST /v1/chat/completions", f.generate)
	mux.HandleFunc("POST /infill", f.generate)
	mux.HandleFunc("POST /api/generate", f.generate)
	mux.HandleFunc("POST /api/chat", f.generate)
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeServer) tokenize(w http.ResponseWriter, r *http.Request) {
	if f.tokensPerWord == 0 {
		http.NotFound(w, r)
		return
	}
	var body struct{ Content string }
	json.NewDecoder(r.Body).Decode(&body)
	n := len(strings.Fields(body.Content)) * f.tokensPerWord
	tokens := make([]int, n)
	json.NewEncoder(w).Encode(map[string]any{"tokens": tokens})
}

// all is every request so far, in arrival order.
func (f *fakeServer) all() []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seenRequest(nil), f.seen...)
}

func (f *fakeServer) requests(path string) []seenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seenRequest
	for _, s := range f.seen {
		if s.path == path {
			out = append(out, s)
		}
	}
	return out
}

// promptOf flattens a request body of any protocol into its prompt text.
func promptOf(path string, b map[string]any) string {
	s := func(k string) string { v, _ := b[k].(string); return v }
	switch path {
	case "/infill":
		var extra []string
		for _, x := range b["input_extra"].([]any) {
			extra = append(extra, x.(map[string]any)["text"].(string))
		}
		return strings.Join(extra, " ") + " " + s("input_prefix") + s("prompt") + " " + s("input_suffix")
	case "/v1/chat/completions", "/api/chat":
		var parts []string
		for _, m := range b["messages"].([]any) {
			mm := m.(map[string]any)
			parts = append(parts, mm["role"].(string)+": "+mm["content"].(string))
		}
		return strings.Join(parts, " ")
	}
	return s("prompt") + " " + s("suffix")
}

func maxTokensOf(b map[string]any) int {
	for _, k := range []string{"max_tokens", "n_predict"} {
		if v, ok := b[k].(float64); ok {
			return int(v)
		}
	}
	if o, ok := b["options"].(map[string]any); ok {
		return int(o["num_predict"].(float64))
	}
	return 16
}

func (f *fakeServer) generate(w http.ResponseWriter, r *http.Request) {
	if (f.noInfill && r.URL.Path == "/infill") || (f.noCompletions && r.URL.Path == "/v1/completions") {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`)
		return
	}
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":"bad json"}`, http.StatusBadRequest)
		return
	}
	words := strings.Fields(promptOf(r.URL.Path, body))
	n := maxTokensOf(body)
	class := r.Header.Get("X-Superfluid-Class")
	block := f.blockBackground && class == "background" && n > 1

	f.mu.Lock()
	cached := 0
	for _, h := range f.history {
		k := 0
		for k < len(h) && k < len(words) && h[k] == words[k] {
			k++
		}
		cached = max(cached, k)
	}
	f.seen = append(f.seen, seenRequest{path: r.URL.Path, class: class, body: body, bgActive: f.bgActive})
	if f.hits == nil {
		f.hits = map[string]int{}
	}
	f.hits[r.URL.Path]++
	hit := f.hits[r.URL.Path]
	if block {
		f.bgActive++
	}
	reply := strings.Fields(strings.Repeat("tok ", n))
	f.history = append(f.history, append(words, reply...))
	active := f.bgActive
	f.mu.Unlock()
	if f.hook != nil {
		f.hook(r, active)
	}
	if f.fail != nil {
		if status := f.fail(r.URL.Path, hit, body); status != 0 {
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"code":%d,"message":"injected failure","type":"server_error"}}`, status)
			return
		}
	}
	cut := f.cut != nil && f.cut(r.URL.Path, hit, body)

	if block {
		defer func() { f.mu.Lock(); f.bgActive--; f.mu.Unlock() }()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	stream, _ := body["stream"].(bool)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		stream = body["stream"] != false
	}
	f.answer(w, r.URL.Path, stream, len(words), cached, n, cut)
}

// answer writes n tokens in the endpoint's protocol, streamed or whole;
// cut ends a stream before its last event, as a dying server does.
func (f *fakeServer) answer(w http.ResponseWriter, path string, stream bool, prompt, cached, n int, cut bool) {
	usage := map[string]any{"prompt_tokens": prompt, "completion_tokens": n, "total_tokens": prompt + n,
		"prompt_tokens_details": map[string]any{"cached_tokens": cached}}
	piece := func(text string, last bool) map[string]any {
		switch path {
		case "/v1/completions":
			return map[string]any{"choices": []any{map[string]any{"index": 0, "text": text}}}
		case "/v1/chat/completions":
			if !stream {
				return map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": text}}}, "usage": usage}
			}
			return map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}}}}
		case "/infill":
			ev := map[string]any{"content": text, "stop": last}
			if last {
				ev["timings"] = map[string]any{"prompt_n": prompt - cached, "cache_n": cached, "predicted_n": n}
				ev["tokens_evaluated"] = prompt
			}
			return ev
		case "/api/chat":
			ev := map[string]any{"message": map[string]any{"role": "assistant", "content": text}, "done": last}
			if last {
				ev["prompt_eval_count"], ev["eval_count"] = prompt, n
			}
			return ev
		}
		ev := map[string]any{"response": text, "done": last}
		if last {
			ev["prompt_eval_count"], ev["eval_count"] = prompt, n
		}
		return ev
	}
	text := strings.Repeat("tok ", n)
	switch {
	case !stream:
		ev := piece(text, true)
		if strings.HasPrefix(path, "/v1/") {
			ev["usage"] = usage
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(ev)
	case strings.HasPrefix(path, "/api/"):
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		for range n {
			enc.Encode(piece("tok ", false))
			w.(http.Flusher).Flush()
		}
		if cut {
			return
		}
		enc.Encode(piece("", true))
	default:
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
		if path == "/v1/chat/completions" {
			send(map[string]any{"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}}}})
		}
		for range n {
			send(piece("tok ", false))
		}
		if cut {
			return
		}
		if path == "/infill" {
			send(piece("", true))
		} else {
			send(map[string]any{"choices": []any{}, "usage": usage})
			fmt.Fprint(w, "data: [DONE]\n\n")
		}
	}
}
