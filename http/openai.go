package http

import (
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/valyala/fasthttp"
)

func openaiRoutes() map[string]route {
	return map[string]route{
		"/v1/chat/completions": {method: "POST", kind: apiOpenAI, handler: (*Server).openaiChat},
		"/v1/models":           {method: "GET", kind: apiOpenAI, handler: (*Server).openaiModels},
	}
}

func (s *Server) openaiModels(ctx *fasthttp.RequestCtx, m *Model) error {
	return writeJSON(ctx, map[string]any{
		"object": "list",
		"data":   []oaiModel{{ID: m.Name, Object: "model", Created: s.started.Unix(), OwnedBy: "superfluid"}},
	})
}

// newID returns a random response id with prefix.
func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
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
