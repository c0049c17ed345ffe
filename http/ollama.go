package http

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/gguf"
)

// ollamaRoutes serve Ollama's API (github.com/ollama/ollama/api, v0.24.0)
// for the one model this server runs: Ollama's own client, Continue, Open
// WebUI and the editors that speak it can use the server unchanged. Pull
// and delete work on the models directory (ollama_pull.go); /api/tags
// lists its models beside the one served. Create, copy and push are
// absent: the served model is chosen when the server starts.
func ollamaRoutes() map[string]route {
	return map[string]route{
		// Clients probe "/" (HEAD or GET) and /api/version before anything
		// else; both answer while the model loads and without an API key,
		// as they reveal nothing.
		"/":             {method: "GET", kind: apiOllama, handler: (*Server).ollamaRoot, public: true, loading: true},
		"/api/version":  {method: "GET", kind: apiOllama, handler: (*Server).ollamaVersion, public: true, loading: true},
		"/api/tags":     {method: "GET", kind: apiOllama, handler: (*Server).ollamaTags},
		"/api/ps":       {method: "GET", kind: apiOllama, handler: (*Server).ollamaPS},
		"/api/show":     {method: "POST", kind: apiOllama, handler: (*Server).ollamaShow},
		"/api/generate": {method: "POST", kind: apiOllama, handler: (*Server).ollamaGenerate},
		"/api/chat":     {method: "POST", kind: apiOllama, handler: (*Server).ollamaChat},
		"/api/pull":     {method: "POST", kind: apiOllama, handler: (*Server).ollamaPull},
		"/api/delete":   {method: "DELETE", kind: apiOllama, handler: (*Server).ollamaDelete},
	}
}

func (s *Server) ollamaRoot(ctx *fasthttp.RequestCtx, _ *Model) error {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("Ollama is running")
	return nil
}

// ollamaVersion reports the server's version. Clients compare it as a
// semantic version, so a build without one ("dev") reports 0.0.0-dev.
func (s *Server) ollamaVersion(ctx *fasthttp.RequestCtx, _ *Model) error {
	v := strings.TrimPrefix(s.cfg.Version, "v")
	if v == "" || v[0] < '0' || v[0] > '9' {
		v = strings.TrimSuffix("0.0.0-"+v, "-")
	}
	return writeJSON(ctx, map[string]string{"version": v})
}

// ollamaTags lists the served model, then the models directory's others.
func (s *Server) ollamaTags(ctx *fasthttp.RequestCtx, m *Model) error {
	f := modelFacts(m)
	name := ollamaName(m)
	list := []ollamaListModel{{
		Name: name, Model: name, ModifiedAt: f.modified, Size: f.size, Digest: m.Desc.Identity, Details: f.details,
	}}
	if st := s.modelStore(); st != nil {
		stored, err := st.List(ctx)
		if err != nil { // the served model is still there to list
			slog.Warn("listing the models directory", "err", err)
		}
		list = append(list, ollamaStored(stored, m)...)
	}
	return writeJSON(ctx, map[string]any{"models": list})
}

// ollamaStored lists the directory's models but the served one, with the
// details their GGUF headers give.
func ollamaStored(stored []StoredModel, served *Model) []ollamaListModel {
	var out []ollamaListModel
	for _, sm := range stored {
		if sameFile(sm.Path, served.Path) {
			continue
		}
		name := ollamaName(&Model{Name: sm.Name})
		out = append(out, ollamaListModel{Name: name, Model: name, ModifiedAt: sm.Modified, Size: sm.Size,
			Digest: sm.SHA256, Details: storedDetails(sm)})
	}
	return out
}

// ollamaPS lists the model as running. It never expires (keep_alive is
// accepted and ignored), so expires_at is as far away as Ollama puts a
// model kept alive forever; size_vram is 0 on a CPU build.
func (s *Server) ollamaPS(ctx *fasthttp.RequestCtx, m *Model) error {
	f := modelFacts(m)
	name := ollamaName(m)
	return writeJSON(ctx, map[string]any{"models": []ollamaRunningModel{{
		Name: name, Model: name, Size: f.size, Digest: m.Desc.Identity, Details: f.details,
		ExpiresAt: time.Now().Add(time.Duration(math.MaxInt64)), SizeVRAM: 0, ContextLength: m.Desc.Ctx,
		Cache: cacheStatusOf(m),
	}}})
}

// ollamaShow describes the model. Its template is the model's FIM format
// as an Ollama Go template ("{{ .Prompt }}" alone when it cannot FIM):
// Continue and other editors enable fill-in-the-middle only when the
// template mentions .Suffix. Chat prompts are rendered with the model's
// Jinja template, which Ollama's response has no field for.
func (s *Server) ollamaShow(ctx *fasthttp.RequestCtx, m *Model) error {
	var req ollamaShowRequest
	if err := decodeJSON(ctx, &req); err != nil {
		return err
	}
	name := cmp.Or(req.Model, req.Name)
	if err := ollamaCheckModel(m, name); err != nil {
		return err
	}
	f := modelFacts(m)
	info := f.info
	if req.Verbose {
		file, _ := gguf.Open(m.Path)
		info = modelInfo(m, file, true)
	}
	caps := []string{"completion"}
	tmpl := "{{ .Prompt }}"
	if m.FIM != nil {
		tmpl = m.FIM.Template()
		if m.FIM.Capable() {
			caps = append(caps, "insert")
		}
	}
	// Tools and thinking are listed when the template writes them, as
	// Ollama lists them from the model's template; a template without a
	// call syntax still takes tools through the generic format.
	if rf := m.replyFormat().format; rf.HasCalls() && !rf.Generic {
		caps = append(caps, "tools")
	}
	if m.replyFormat().format.HasReasoning() {
		caps = append(caps, "thinking")
	}
	if m.Sched == nil {
		caps = []string{"embedding"} // as Ollama lists an embedding model
	}
	params := ollamaParameters(m)
	return writeJSON(ctx, ollamaShowResponse{
		Modelfile: ollamaModelfile(m, tmpl, params), Parameters: strings.Join(params, "\n"), Template: tmpl,
		Details: f.details, ModelInfo: info, Capabilities: caps, ModifiedAt: f.modified,
	})
}

// ollamaName is the model's name as Ollama lists it, always with a tag.
func ollamaName(m *Model) string {
	for i := len(m.Name) - 1; i >= 0 && m.Name[i] != '/'; i-- {
		if m.Name[i] == ':' {
			return m.Name
		}
	}
	return fmt.Sprintf("%s:latest", m.Name)
}
