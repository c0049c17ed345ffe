package http

import (
	"cmp"
	"slices"
	"strings"

	"superfluid/http/anthropic"
	"superfluid/http/live"
	"superfluid/http/llamacpp"
	"superfluid/http/ollama"
	"superfluid/http/openai"
	"superfluid/http/openai/conversations"
	"superfluid/http/openai/responses"
	"superfluid/http/rerank"
	"superfluid/http/transcribe"
	"superfluid/http/wire"
	"superfluid/task"
	"superfluid/web"
)

// routeTable gathers every API's routes: path → one route per method, and
// the paths that hold an {id} segment, most specific (longest) first. The
// API packages' routes are mounted as they declare them (mounted); the
// routes still defined in this package take their body class and
// generation flag from the tables below.
func (s *Server) routeTable() (map[string][]route, []string, error) {
	all := map[string][]route{}
	for _, part := range []map[string]route{
		commonRoutes(),
	} {
		for path, r := range part {
			all[path] = append(all[path], r)
		}
	}
	for _, path := range generationPaths {
		for i := range all[path] {
			all[path][i].generates = true
		}
	}
	for path, rs := range all {
		for i := range rs {
			rs[i].body = bodyKindOf(rs[i].method, path)
			rs[i].path = path
		}
	}
	host := serverHost{s}
	apis := slices.Concat(llamacpp.Routes(host), ollama.Routes(host), openai.Routes(host, &s.openai), responses.Routes(host, &s.responses), conversations.Routes(host, &s.responses), anthropic.Routes(host), live.Routes(host), rerank.Routes(host), transcribe.Routes(host))
	// The web page answers browsers at "/" (Ollama's clients keep its
	// text) and serves its files under /ui/.
	apis, err := web.WithPage(apis)
	if err != nil {
		return nil, nil, err
	}
	for _, wr := range apis {
		r := mounted(wr)
		r.path = wr.Path
		all[wr.Path] = append(all[wr.Path], r)
	}
	for _, u := range beyondPolicyRoutes {
		for i := range all[u.path] {
			if all[u.path][i].method == u.method {
				all[u.path][i].beyondPolicy = true
			}
		}
	}
	var patterns []string
	for path := range all {
		if strings.Contains(path, "{id}") {
			patterns = append(patterns, path)
		}
	}
	slices.SortFunc(patterns, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	return all, patterns, nil
}

// generationPaths are the routes still in this package that generate
// text: an embedding model, which has no scheduler, answers them 400
// before their handler runs. (An API package's route says so itself:
// wire.Route.Generates.)
var generationPaths = []string{
	"/v1/chat/completions", "/v1/completions", "/v1/responses",
}

// beyondPolicyRoutes are the routes whose work no key's policy could
// follow: a batch runs after its request, in the background, by no key;
// a pull or a delete changes the models every key sees. A keys file's key
// with any restriction is refused them (403, naming why); one without
// restrictions, and --api-key's, may use them.
var beyondPolicyRoutes = []struct{ method, path string }{
	{"POST", "/v1/batches"}, {"POST", "/api/pull"}, {"DELETE", "/api/delete"},
}

// bodyKindOf says how large a body a route takes: a POST carries a
// prompt or a conversation unless it is an upload or names only a model,
// a reference or an id; every other method takes a small body or none.
func bodyKindOf(method, path string) bodyKind {
	switch {
	case method == "POST" && path == "/v1/files":
		return bodyUpload
	case method == "POST" && !slices.Contains(smallPostPaths, path):
		return bodyConversation
	}
	return bodyControl
}

// smallPostPaths are the POST routes whose body names a model, a pull
// source or nothing.
var smallPostPaths = []string{"/api/show", "/api/pull", "/v1/batches", "/v1/batches/{id}/cancel"}

// checkModelKind refuses a generation route to an embedding model and an
// embedding route to a generation model, as Ollama does.
func checkModelKind(m *Model, r route) error {
	switch {
	case m == nil:
		return nil
	case r.generates && m.Sched == nil:
		return wire.BadRequest("model %q is an embedding model: it does not generate text", m.Name)
	case r.embeds && m.Embed == nil:
		return wire.FromTask(task.NoEmbeddings(&m.Model))
	}
	return nil
}
