package http

import (
	"github.com/valyala/fasthttp"
)

func commonRoutes() map[string]route {
	return map[string]route{
		"/health":  {method: "GET", kind: apiLlama, handler: (*Server).health, public: true, loading: true},
		"/metrics": {method: "GET", kind: apiLlama, handler: (*Server).metrics},
	}
}

// health answers 503 while the model loads and 200 once it serves, as
// llama.cpp's server does (editors poll it before their first request).
func (s *Server) health(ctx *fasthttp.RequestCtx, _ *Model) error {
	if s.registry() == nil {
		return &apiError{Status: fasthttp.StatusServiceUnavailable, Type: "unavailable_error", Msg: "Loading model"}
	}
	ctx.SetContentType("application/json")
	ctx.SetBodyString(`{"status":"ok"}`)
	return nil
}
