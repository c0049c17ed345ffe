package http

import (
	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
)

func commonRoutes() map[string]route {
	return map[string]route{
		"/health":  {method: "GET", kind: wire.Llama, handler: (*Server).health, public: true, loading: true},
		"/metrics": {method: "GET", kind: wire.Llama, handler: (*Server).metrics},
	}
}

// health answers 503 while the model loads and 200 once it serves, as
// llama.cpp's server does (editors poll it before their first request).
func (s *Server) health(ctx *fasthttp.RequestCtx, _ *Model) error {
	if s.registry() == nil {
		return &wire.Error{Status: fasthttp.StatusServiceUnavailable, Type: "unavailable_error", Msg: "Loading model"}
	}
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"status":"ok"}`)
	return nil
}
