package http

// routeTable gathers every API's routes.
func (s *Server) routeTable() map[string]route {
	all := map[string]route{}
	for _, part := range []map[string]route{
		commonRoutes(),
		openaiRoutes(),
		llamaRoutes(), openaiCompletionRoutes(),
		ollamaRoutes(),
		anthropicRoutes(),
	} {
		for path, r := range part {
			all[path] = r
		}
	}
	return all
}
