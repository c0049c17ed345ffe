// Package ollama is Ollama's API (github.com/ollama/ollama/api, v0.24.0)
// for the models this server runs: Ollama's own client, Continue, Open
// WebUI and the editors that speak it can use the server unchanged.
// /api/generate and /api/chat decode into one task.Request and render
// what the core hands back, streamed as NDJSON (Ollama's default) or
// whole (answer.go); /api/tags lists everything a request may name (the
// registry's list), /api/ps what is loaded; /api/pull and /api/delete
// work on the models directory (pull.go). Create, copy and push are
// absent.
package ollama

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/gguf"
	"superfluid/http/wire"
	"superfluid/task"
)

// api is Ollama's handlers over the server that mounts them, with what
// they keep per server: the models' facts, read once from their files.
type api struct {
	host   wire.Host
	facts  factsCache
	stored storedDetailsCache // the directory models' /api/tags details
}

// Routes are Ollama's routes on h.
func Routes(h wire.Host) []wire.Route {
	a := &api{host: h}
	return []wire.Route{
		// Clients probe "/" (HEAD or GET) and /api/version before anything
		// else; both answer while the model loads and without an API key,
		// as they reveal nothing.
		{Method: "GET", Path: "/", API: wire.Ollama, Handle: a.root, Public: true, Loading: true},
		{Method: "GET", Path: "/api/version", API: wire.Ollama, Handle: a.version, Public: true, Loading: true},
		{Method: "GET", Path: "/api/tags", API: wire.Ollama, Handle: a.tags, AnyModel: true},
		{Method: "GET", Path: "/api/ps", API: wire.Ollama, Handle: a.ps, AnyModel: true},
		{Method: "POST", Path: "/api/show", API: wire.Ollama, Handle: a.show},
		{Method: "POST", Path: "/api/generate", API: wire.Ollama, Handle: a.generate, Generates: true},
		{Method: "POST", Path: "/api/chat", API: wire.Ollama, Handle: a.chat, Generates: true},
		{Method: "POST", Path: "/api/embed", API: wire.Ollama, Handle: a.embed, Embeds: true},
		{Method: "POST", Path: "/api/embeddings", API: wire.Ollama, Handle: a.embeddings, Embeds: true},
		{Method: "POST", Path: "/api/pull", API: wire.Ollama, Handle: a.pull, AnyModel: true},
		{Method: "DELETE", Path: "/api/delete", API: wire.Ollama, Handle: a.delete, AnyModel: true},
	}
}

func (a *api) root(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBodyString("Ollama is running")
	return nil
}

// version reports the server's version. Clients compare it as a semantic
// version, so a build without one ("dev") reports 0.0.0-dev.
func (a *api) version(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	v := strings.TrimPrefix(a.host.Settings().Version, "v")
	if v == "" || v[0] < '0' || v[0] > '9' {
		v = strings.TrimSuffix("0.0.0-"+v, "-")
	}
	return wire.WriteJSON(ctx, map[string]string{"version": v})
}

// tags lists every model that can be asked for: the loaded ones and the
// models directory's. A model not loaded is described from its file.
func (a *api) tags(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	list := []listModel{}
	for _, mi := range a.host.Available(ctx) {
		name := taggedName(mi.Name)
		lm := listModel{Name: name, Model: name, ModifiedAt: mi.Modified, Size: mi.Size, Digest: mi.Digest}
		if mi.Loaded != nil {
			lm.Details = a.facts.of(mi.Loaded).details
		} else {
			lm.Details = a.stored.of(mi)
		}
		list = append(list, lm)
	}
	return wire.WriteJSON(ctx, map[string]any{"models": list})
}

// ps lists the loaded models: size is the memory each holds (weights, KV
// pool, host cache budget); a model that never expires (a resident one,
// or keep_alive < 0) has expires_at as far away as Ollama puts one;
// size_vram is 0 on a CPU build.
func (a *api) ps(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	list := []runningModel{}
	for _, lm := range a.host.Loaded(ctx) {
		m := lm.Model
		name := taggedName(m.Name)
		exp := lm.ExpiresAt
		if exp.IsZero() {
			exp = time.Now().Add(time.Duration(math.MaxInt64))
		}
		list = append(list, runningModel{
			Name: name, Model: name, Size: lm.Size, Digest: m.Desc.Identity, Details: a.facts.of(m).details,
			ExpiresAt: exp, SizeVRAM: 0, ContextLength: m.Desc.Ctx, Cache: lm.Cache,
		})
	}
	return wire.WriteJSON(ctx, map[string]any{"models": list})
}

// show describes the model. Its template is the model's FIM format as an
// Ollama Go template ("{{ .Prompt }}" alone when it cannot FIM): Continue
// and other editors enable fill-in-the-middle only when the template
// mentions .Suffix. Chat prompts are rendered with the model's Jinja
// template, which Ollama's response has no field for.
func (a *api) show(ctx *fasthttp.RequestCtx, m *task.Model) error {
	var req showRequest
	if err := wire.DecodeJSON(ctx, &req); err != nil {
		return err
	}
	name := cmp.Or(req.Model, req.Name)
	if err := checkModel(name); err != nil {
		return err
	}
	f := a.facts.of(m)
	info := f.info
	if req.Verbose {
		file, _ := gguf.Open(m.Path)
		info = modelInfo(m, file, true)
	}
	caps := []string{"completion"}
	if m.Sees() {
		caps = append(caps, "vision") // Open WebUI offers image upload on it
	}
	if m.Hears() {
		caps = append(caps, "audio")
	}
	tmpl := "{{ .Prompt }}"
	// With a FIM model (--fim-model) it answers this model's suffix
	// requests, so its format is the one to show.
	fm, release := a.host.FIMFor(ctx, m)
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
	params := parameters(m)
	return wire.WriteJSON(ctx, showResponse{
		Modelfile: modelfile(m, tmpl, params), Parameters: strings.Join(params, "\n"), Template: tmpl,
		Details: f.details, ModelInfo: info, Capabilities: caps, ModifiedAt: f.modified,
	})
}

// taggedName is name with Ollama's default tag when it has none: the
// name as Ollama lists it.
func taggedName(name string) string {
	for i := len(name) - 1; i >= 0 && name[i] != '/'; i-- {
		if name[i] == ':' {
			return name
		}
	}
	return fmt.Sprintf("%s:latest", name)
}
