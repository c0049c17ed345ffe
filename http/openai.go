package http

import (
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
)

func openaiRoutes() map[string]route {
	return map[string]route{
		"/v1/chat/completions": {method: "POST", kind: wire.OpenAI, handler: (*Server).openaiChat},
		"/v1/models":           {method: "GET", kind: wire.OpenAI, handler: (*Server).openaiModels, anyModel: true},
	}
}

// openaiModels lists every model that can be asked for, loaded or not;
// created is the file's modification time.
func (s *Server) openaiModels(ctx *fasthttp.RequestCtx, _ *Model) error {
	data := []oaiModel{}
	for _, mi := range s.registry().Available() {
		created := s.started.Unix()
		if !mi.Modified.IsZero() {
			created = mi.Modified.Unix()
		}
		data = append(data, oaiModel{ID: mi.Name, Object: "model", Created: created, OwnedBy: "superfluid"})
	}
	return wire.WriteJSON(ctx, map[string]any{"object": "list", "data": data})
}

// fingerprint names the model build for system_fingerprint.
func fingerprint(m *Model) string {
	if len(m.Desc.Identity) >= 12 {
		return "sf_" + m.Desc.Identity[:12]
	}
	return "sf"
}

// unixNow is the created time of responses.
func unixNow() int64 { return time.Now().Unix() }
