// Package web is the page the server shows a browser at "/": a chat over
// the OpenAI routes and a live view of the server over /v1/status. Its
// files (ui/) are plain HTML, CSS and JavaScript modules written by hand
// and embedded in the binary, so the page works offline and needs no
// Node to build; ui/test holds the scripts' unit tests (node --test).
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"path"
	"strings"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

//go:embed ui/*.html ui/*.js ui/*.css ui/*.svg
var uiFiles embed.FS

// AssetPrefix is the path the page's files are served under.
const AssetPrefix = "/ui/"

// ContentSecurityPolicy holds the page to its own origin: scripts and
// styles from its files only (no inline script, no eval), requests to
// this server only, nothing framed or framing it. The server's origin
// rules let the page's own requests through (sameOrigin in http).
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file as it is answered.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// site is the embedded files by name, and the page itself.
type site struct {
	assets map[string]asset
	page   asset
}

func load() (*site, error) {
	s := &site{assets: map[string]asset{}}
	err := fs.WalkDir(uiFiles, "ui", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := uiFiles.ReadFile(p)
		if err != nil {
			return fmt.Errorf("web: reading %s: %w", p, err)
		}
		sum := sha256.Sum256(b)
		a := asset{body: b, ctype: contentType(p), etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		s.assets[path.Base(p)] = a
		return nil
	})
	if err != nil {
		return nil, err
	}
	page, ok := s.assets["index.html"]
	if !ok {
		return nil, fmt.Errorf("web: ui/index.html is not embedded")
	}
	s.page = page
	return s, nil
}

// contentType is a file's type by its extension; JavaScript modules must
// be served as text/javascript or the browser refuses them.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// WithPage returns routes with the page mounted: its files under
// AssetPrefix, and GET "/" answering the page to a request whose Accept
// prefers HTML (a browser) while every other client keeps the answer
// routes gave "/" (Ollama's "Ollama is running", which its clients probe
// for). The files and the page need no API key: a browser cannot attach
// one to a page load, and they reveal nothing; the page asks for the key
// when the API answers 401.
func WithPage(routes []wire.Route) ([]wire.Route, error) {
	s, err := load()
	if err != nil {
		return nil, err
	}
	out := make([]wire.Route, 0, len(routes)+2)
	rooted := false
	for _, r := range routes {
		if r.Path == "/" && r.Method == "GET" {
			r.Handle = s.root(r.Handle)
			rooted = true
		}
		out = append(out, r)
	}
	if !rooted {
		out = append(out, wire.Route{Method: "GET", Path: "/", API: wire.Llama, Handle: s.root(nil), Public: true, Loading: true, AnyModel: true})
	}
	return append(out, wire.Route{Method: "GET", Path: AssetPrefix + "{id}", API: wire.Llama, Handle: s.file,
		Public: true, Loading: true, AnyModel: true}), nil
}

// root answers the page to browsers and otherwise what other answers
// (404 when nothing else answers "/").
func (s *site) root(other wire.Handler) wire.Handler {
	return func(ctx *fasthttp.RequestCtx, m *task.Model) error {
		if PrefersHTML(string(ctx.Request.Header.Peek("Accept"))) {
			s.answer(ctx, s.page)
			ctx.Response.Header.Set("Vary", "Accept")
			return nil
		}
		if other == nil {
			return &wire.Error{Status: fasthttp.StatusNotFound, Type: "not_found_error", Msg: "no route GET / for this Accept; browsers get the web page"}
		}
		err := other(ctx, m)
		ctx.Response.Header.Set("Vary", "Accept")
		return err
	}
}

// file answers one of the page's files.
func (s *site) file(ctx *fasthttp.RequestCtx, _ *task.Model) error {
	name := wire.PathID(ctx)
	a, ok := s.assets[name]
	if !ok {
		return &wire.Error{Status: fasthttp.StatusNotFound, Type: "not_found_error", Msg: fmt.Sprintf("no file %q in the web page", truncate(name))}
	}
	s.answer(ctx, a)
	return nil
}

// answer writes a file with the headers that keep the page to itself.
// The names carry no hash, so the browser revalidates each file
// (no-cache) and an unchanged one costs a 304 by its ETag.
func (s *site) answer(ctx *fasthttp.RequestCtx, a asset) {
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", a.etag)
	h.SetContentType(a.ctype)
	if matchesETag(string(ctx.Request.Header.Peek("If-None-Match")), a.etag) {
		ctx.SetStatusCode(fasthttp.StatusNotModified)
		return
	}
	ctx.SetBody(a.body)
}

// matchesETag reports whether an If-None-Match header names etag ("*"
// names any; weak tags compare by their opaque part, as RFC 9110 asks).
func matchesETag(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == etag {
			return true
		}
	}
	return false
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
