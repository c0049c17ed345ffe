package http

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/gguf"
	"superfluid/http/wire"
)

// ollamaRoutes serve Ollama's API (github.com/ollama/ollama/api, v0.24.0)
// for the models this server runs: Ollama's own client, Continue, Open
// WebUI and the editors that speak it can use the server unchanged. Pull
// and delete work on the models directory (ollama_pull.go); /api/tags
// lists everything a request may name (the registry's list), /api/ps what
// is loaded. Create, copy and push are absent.
func ollamaRoutes() map[string]route {
	return map[string]route{
		// Clients probe "/" (HEAD or GET) and /api/version before anything
		// else; both answer while the model loads and without an API key,
		// as they reveal nothing.
		"/":             {method: "GET", kind: wire.Ollama, handler: (*Server).ollamaRoot, public: true, loading: true},
		"/api/version":  {method: "GET", kind: wire.Ollama, handler: (*Server).ollamaVersion, public: true, loading: true},
		"/api/tags":     {method: "GET", kind: wire.Ollama, handler: (*Server).ollamaTags, anyModel: true},
		"/api/ps":       {method: "GET", kind: wire.Ollama, handler: (*Server).ollamaPS, anyModel: true},
		"/api/show":     {method: "POST", kind: wire.Ollama, handler: (*Server).ollamaShow},
		"/api/generate": {method: "POST", kind: wire.Ollama, handler: (*Server).ollamaGenerate},
		"/api/chat":     {method: "POST", kind: wire.Ollama, handler: (*Server).ollamaChat},
		"/api/pull":     {method: "POST", kind: wire.Ollama, handler: (*Server).ollamaPull, anyModel: true},
		"/api/delete":   {method: "DELETE", kind: wire.Ollama, handler: (*Server).ollamaDelete, anyModel: true},
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
	return wire.WriteJSON(ctx, map[string]string{"version": v})
}

// ollamaTags lists every model that can be asked for: the loaded ones and
// the models directory's. A model not loaded is described from its file.
func (s *Server) ollamaTags(ctx *fasthttp.RequestCtx, _ *Model) error {
	list := []ollamaListModel{}
	for _, mi := range s.registry().Available() {
		name := ollamaTagged(mi.Name)
		lm := ollamaListModel{Name: name, Model: name, ModifiedAt: mi.Modified, Size: mi.Size, Digest: mi.Digest}
		if mi.Loaded != nil {
			lm.Details = modelFacts(mi.Loaded).details
		} else {
			lm.Details = s.stored.storedDetails(StoredModel{Path: mi.Path, Size: mi.Size, Modified: mi.Modified})
		}
		list = append(list, lm)
	}
	return wire.WriteJSON(ctx, map[string]any{"models": list})
}

// ollamaPS lists the loaded models: size is the memory each holds
// (weights, KV pool, host cache budget); a model that never expires (a
// resident one, or keep_alive < 0) has expires_at as far away as Ollama
// puts one; size_vram is 0 on a CPU build.
func (s *Server) ollamaPS(ctx *fasthttp.RequestCtx, _ *Model) error {
	list := []ollamaRunningModel{}
	for _, lm := range s.registry().Loaded() {
		m := lm.Model
		name := ollamaName(m)
		exp := lm.ExpiresAt
		if exp.IsZero() {
			exp = time.Now().Add(time.Duration(math.MaxInt64))
		}
		list = append(list, ollamaRunningModel{
			Name: name, Model: name, Size: lm.Size, Digest: m.Desc.Identity, Details: modelFacts(m).details,
			ExpiresAt: exp, SizeVRAM: 0, ContextLength: m.Desc.Ctx, Cache: cacheStatusOf(m),
		})
	}
	return wire.WriteJSON(ctx, map[string]any{"models": list})
}

// ollamaShow describes the model. Its template is the model's FIM format
// as an Ollama Go template ("{{ .Prompt }}" alone when it cannot FIM):
// Continue and other editors enable fill-in-the-middle only when the
// template mentions .Suffix. Chat prompts are rendered with the model's
// Jinja template, which Ollama's response has no field for.
func (s *Server) ollamaShow(ctx *fasthttp.RequestCtx, m *Model) error {
	var req ollamaShowRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	name := cmp.Or(req.Model, req.Name)
	if err := ollamaCheckModel(name); err != nil {
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
	// With a FIM model (--fim-model) it answers this model's suffix
	// requests, so its format is the one to show.
	fm, release := s.fimModel(ctx, m)
	defer release()
	if fm.FIM != nil {
		tmpl = fm.FIM.Template()
		if fm.FIM.Capable() {
			caps = append(caps, "insert")
		}
	}
	// Tools and thinking are listed when the template writes them, as
	// Ollama lists them from the model's template; a template without a
	// call syntax still takes tools through the generic format.
	if rf := m.Reply().Format; rf.HasCalls() && !rf.Generic {
		caps = append(caps, "tools")
	}
	if m.Reply().Format.HasReasoning() {
		caps = append(caps, "thinking")
	}
	if m.Sched == nil {
		caps = []string{"embedding"} // as Ollama lists an embedding model
	}
	params := ollamaParameters(m)
	return wire.WriteJSON(ctx, ollamaShowResponse{
		Modelfile: ollamaModelfile(m, tmpl, params), Parameters: strings.Join(params, "\n"), Template: tmpl,
		Details: f.details, ModelInfo: info, Capabilities: caps, ModifiedAt: f.modified,
	})
}

// ollamaName is the model's name as Ollama lists it, always with a tag.
func ollamaName(m *Model) string { return ollamaTagged(m.Name) }

// ollamaTagged is name with Ollama's default tag when it has none.
func ollamaTagged(name string) string {
	for i := len(name) - 1; i >= 0 && name[i] != '/'; i-- {
		if name[i] == ':' {
			return name
		}
	}
	return fmt.Sprintf("%s:latest", name)
}
