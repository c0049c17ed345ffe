// Package openai is OpenAI's API: chat completions, legacy completions
// (with fill-in-the-middle through a suffix), embeddings, the model list,
// and files and batches, field for field as the official clients send and
// read them (the Responses API is its sub-package, openai/responses). Its
// handlers decode a request into the core's (package task), hand it over
// and render what comes back in OpenAI's shape; Answer runs a batch line
// the same way without a transport.
package openai

import (
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/batches"
	"superfluid/http/wire"
	"superfluid/task"
)

// Stores are the API's own state, which the app hands over once it has
// opened it: the batch store.
type Stores struct {
	batches atomic.Pointer[batches.Store]
}

// SetBatches gives /v1/files and /v1/batches their store; without one
// those routes answer that the batch API is off.
func (st *Stores) SetBatches(s *batches.Store) { st.batches.Store(s) }

// api is OpenAI's handlers over the server that mounts them.
type api struct {
	host   wire.Host
	stores *Stores
}

// Routes are OpenAI's routes on h, with the state in st.
func Routes(h wire.Host, st *Stores) []wire.Route {
	a := &api{host: h, stores: st}
	r := func(method, path string, handle wire.Handler) wire.Route {
		return wire.Route{Method: method, Path: path, API: wire.OpenAI, Handle: handle}
	}
	generates := func(rt wire.Route) wire.Route { rt.Generates = true; return rt }
	anyModel := func(rt wire.Route) wire.Route { rt.AnyModel = true; return rt }
	embeds := func(rt wire.Route) wire.Route { rt.Embeds = true; return rt }
	return []wire.Route{
		generates(r("POST", "/v1/chat/completions", a.chat)),
		generates(r("POST", "/v1/completions", a.completions)),
		embeds(r("POST", "/v1/embeddings", a.embeddings)),
		anyModel(r("GET", "/v1/models", a.models)),
		anyModel(r("GET", "/v1/files", a.listFiles)),
		anyModel(r("POST", "/v1/files", a.uploadFile)),
		anyModel(r("GET", "/v1/files/{id}", a.getFile)),
		anyModel(r("DELETE", "/v1/files/{id}", a.deleteFile)),
		anyModel(r("GET", "/v1/files/{id}/content", a.fileContent)),
		anyModel(r("GET", "/v1/batches", a.listBatches)),
		anyModel(r("POST", "/v1/batches", a.createBatch)),
		anyModel(r("GET", "/v1/batches/{id}", a.getBatch)),
		anyModel(r("POST", "/v1/batches/{id}/cancel", a.cancelBatch)),
	}
}

// models lists every model that can be asked for, loaded or not; created
// is the file's modification time.
func (a *api) models(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	data := []oaiModel{}
	started := a.host.Settings().Started.Unix()
	for _, mi := range a.host.Available(ctx) {
		created := started
		if !mi.Modified.IsZero() {
			created = mi.Modified.Unix()
		}
		data = append(data, oaiModel{ID: mi.Name, Object: "model", Created: created, OwnedBy: "superfluid"})
	}
	return wire.WriteJSON(ctx, map[string]any{"object": "list", "data": data})
}

// fingerprint names the model build for system_fingerprint.
func fingerprint(m *task.Model) string {
	if len(m.Desc.Identity) >= 12 {
		return "sf_" + m.Desc.Identity[:12]
	}
	return "sf"
}

// unixNow is the created time of responses.
func unixNow() int64 { return time.Now().Unix() }
