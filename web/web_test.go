package web

import (
	"regexp"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/task"
)

const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8"

func TestPrefersHTML(t *testing.T) {
	for accept, want := range map[string]bool{
		browserAccept:                       true,
		"text/html":                         true,
		"TEXT/HTML; q=1":                    true,
		"application/xhtml+xml":             true,
		"":                                  false, // Go's client, Ollama's
		"*/*":                               false, // curl
		"application/json":                  false,
		"text/html;q=0.5, application/json": false,
		"text/html;q=0":                     false,
		"text/html;q=NaN":                   false,
		"text/html;q=2":                     false,
		"text/html;q=abc":                   false,
		"application/json;q=0.1, text/html": true,
		strings.Repeat("a/b,", 100) + "text/html": false, // past the entries worth reading
	} {
		if got := PrefersHTML(accept); got != want {
			t.Errorf("PrefersHTML(%q) = %v, want %v", accept, got, want)
		}
	}
}

// mountedRoutes is the page mounted over an Ollama-like "/" route.
func mountedRoutes(t *testing.T) map[string]wire.Route {
	t.Helper()
	other := func(ctx *fasthttp.RequestCtx, _ *task.Model) error {
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.SetBodyString("Ollama is running")
		return nil
	}
	routes, err := WithPage([]wire.Route{{Method: "GET", Path: "/", API: wire.Ollama, Handle: other, Public: true}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]wire.Route{}
	for _, r := range routes {
		out[r.Method+" "+r.Path] = r
	}
	return out
}

func get(t *testing.T, r wire.Route, id string, header map[string]string) *fasthttp.RequestCtx {
	t.Helper()
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod("GET")
	for k, v := range header {
		ctx.Request.Header.Set(k, v)
	}
	if id != "" {
		wire.SetPathID(&ctx, id)
	}
	if err := r.Handle(&ctx, nil); err != nil {
		wire.WriteError(&ctx, r.API, err)
	}
	return &ctx
}

// "/" answers a browser the page, with its security headers, and every
// other client the answer it had before; both vary by Accept.
func TestRootByAccept(t *testing.T) {
	routes := mountedRoutes(t)
	root := routes["GET /"]
	if !root.Public || root.API != wire.Ollama {
		t.Fatalf("the root route lost its flags: %+v", root)
	}
	page := get(t, root, "", map[string]string{"Accept": browserAccept})
	if ct := string(page.Response.Header.ContentType()); ct != "text/html; charset=utf-8" || !strings.Contains(string(page.Response.Body()), `<script type="module" src="/ui/app.js">`) {
		t.Fatalf("browser got %s: %.200s", ct, page.Response.Body())
	}
	for k, want := range map[string]string{
		"Content-Security-Policy": ContentSecurityPolicy, "X-Content-Type-Options": "nosniff",
		"Vary": "Accept", "Cache-Control": "no-cache", "Referrer-Policy": "no-referrer",
	} {
		if got := string(page.Response.Header.Peek(k)); got != want {
			t.Errorf("page header %s = %q, want %q", k, got, want)
		}
	}
	for _, accept := range []string{"", "*/*", "application/json"} {
		probe := get(t, root, "", map[string]string{"Accept": accept})
		if string(probe.Response.Body()) != "Ollama is running" || string(probe.Response.Header.Peek("Vary")) != "Accept" {
			t.Errorf("Accept %q got %q (Vary %q)", accept, probe.Response.Body(), probe.Response.Header.Peek("Vary"))
		}
	}
	// With no other "/" route, a non-browser gets a 404, not the page.
	routes2, err := WithPage(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes2 {
		if r.Path == "/" {
			if ctx := get(t, r, "", nil); ctx.Response.StatusCode() != 404 {
				t.Errorf("a lone page route answers a non-browser %d", ctx.Response.StatusCode())
			}
		}
	}
}

// Every file the page names is served with its type; an unknown name is
// a 404 in llama.cpp's shape; an unchanged file revalidates to 304.
func TestAssets(t *testing.T) {
	routes := mountedRoutes(t)
	files := routes["GET "+AssetPrefix+"{id}"]
	if !files.Public || !files.AnyModel || !files.Loading {
		t.Fatalf("the files need no key, no model, and answer while loading: %+v", files)
	}
	s, err := load()
	if err != nil {
		t.Fatal(err)
	}
	// The files the page links and the modules app.js imports.
	refs := map[string]bool{}
	for name, a := range s.assets {
		for _, m := range regexp.MustCompile(`(?:/ui/|"\./)([a-z]+\.(?:js|css|svg))"`).FindAllStringSubmatch(string(a.body), -1) {
			refs[m[1]] = true
			if _, ok := s.assets[m[1]]; !ok {
				t.Errorf("%s names %s, which is not embedded", name, m[1])
			}
		}
	}
	for _, want := range []string{"app.js", "app.css", "chat.js", "sse.js", "live.js", "plot.js", "format.js", "api.js", "store.js", "liveview.js", "icon.svg"} {
		if !refs[want] {
			t.Errorf("nothing names %s", want)
		}
	}
	types := map[string]string{"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8", "icon.svg": "image/svg+xml", "index.html": "text/html; charset=utf-8"}
	for name, want := range types {
		ctx := get(t, files, name, nil)
		if ctx.Response.StatusCode() != 200 || string(ctx.Response.Header.ContentType()) != want {
			t.Errorf("%s: %d %s, want 200 %s", name, ctx.Response.StatusCode(), ctx.Response.Header.ContentType(), want)
		}
		if string(ctx.Response.Header.Peek("X-Content-Type-Options")) != "nosniff" {
			t.Errorf("%s: no nosniff", name)
		}
		etag := string(ctx.Response.Header.Peek("ETag"))
		again := get(t, files, name, map[string]string{"If-None-Match": `"x", W/` + etag})
		if again.Response.StatusCode() != 304 || len(again.Response.Body()) != 0 {
			t.Errorf("%s with its ETag: %d and %d bytes, want 304 and none", name, again.Response.StatusCode(), len(again.Response.Body()))
		}
		if stale := get(t, files, name, map[string]string{"If-None-Match": `"stale"`}); stale.Response.StatusCode() != 200 {
			t.Errorf("%s with a stale ETag: %d", name, stale.Response.StatusCode())
		}
	}
	for _, bad := range []string{"nope.js", "..", "test", "package.json", strings.Repeat("x", 5000)} {
		ctx := get(t, files, bad, nil)
		if ctx.Response.StatusCode() != 404 || !strings.Contains(string(ctx.Response.Body()), `"code":404`) || len(ctx.Response.Body()) > 400 {
			t.Errorf("file %.20q: %d %.200s", bad, ctx.Response.StatusCode(), ctx.Response.Body())
		}
	}
}

// The page keeps to what its CSP allows: no inline script or handler, no
// style attribute, nothing fetched from elsewhere.
func TestPageKeepsToItsPolicy(t *testing.T) {
	s, err := load()
	if err != nil {
		t.Fatal(err)
	}
	html := string(s.page.body)
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`),      // inline script
		regexp.MustCompile(`\son[a-z]+\s*=`),                     // inline handler
		regexp.MustCompile(`\sstyle\s*=`),                        // style attribute
		regexp.MustCompile(`(?:src|href)\s*=\s*"(?:https?:)?//`), // another origin
	} {
		if m := bad.FindString(html); m != "" {
			t.Errorf("index.html holds %q, which the CSP refuses", m)
		}
	}
	for name, a := range s.assets {
		body := string(a.body)
		for _, bad := range []string{"eval(", "new Function", "http://", "https://", "setAttribute(\"style\"", "innerHTML"} {
			if strings.HasSuffix(name, ".js") && strings.Contains(body, bad) {
				t.Errorf("%s uses %q", name, bad)
			}
		}
	}
}
