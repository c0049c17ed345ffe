package http

import (
	"testing"

	"superfluid/task"
	"superfluid/task/tasktest"
)

// The shared fixtures (task/tasktest) build task.Models; this package's
// handlers take the server's Model around one.

// chatmlModel is tasktest.ChatMLModel as a server Model.
func chatmlModel(t testing.TB, ctx int) *Model {
	return &Model{Model: *tasktest.ChatMLModel(t, ctx)}
}

// fakeModel is tasktest.FakeModel as a server Model.
func fakeModel(t testing.TB, fimCapable bool) *Model {
	return &Model{Model: *tasktest.FakeModel(t, fimCapable)}
}

// stubModel is tasktest.StubModel as a server Model.
func stubModel(t testing.TB) (*Model, *tasktest.StubSched) {
	m, sc := tasktest.StubModel(t)
	return &Model{Model: *m}, sc
}

// checkSpec is tasktest.CheckSpec for a server Model.
func checkSpec(t *testing.T, m *Model, g *task.Request) {
	t.Helper()
	tasktest.CheckSpec(t, &m.Model, g)
}
