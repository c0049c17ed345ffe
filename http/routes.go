package http

import (
	"cmp"
	"slices"
	"strings"
)

// routeTable gathers every API's routes: path → one route per method, and
// the paths that hold an {id} segment, most specific (longest) first.
func (s *Server) routeTable() (map[string][]route, []string) {
	all := map[string][]route{}
	for _, part := range []map[string]route{
		commonRoutes(),
		openaiRoutes(),
		llamaRoutes(), openaiCompletionRoutes(),
		ollamaRoutes(),
		anthropicRoutes(),
	} {
		for path, r := range part {
			all[path] = append(all[path], r)
		}
	}
	for path, rs := range mergeRoutes(openaiBatchRoutes(), responsesRoutes()) {
		all[path] = append(all[path], rs...)
	}
	var patterns []string
	for path := range all {
		if strings.Contains(path, "{id}") {
			patterns = append(patterns, path)
		}
	}
	slices.SortFunc(patterns, func(a, b string) int { return cmp.Or(len(b)-len(a), strings.Compare(a, b)) })
	return all, patterns
}
