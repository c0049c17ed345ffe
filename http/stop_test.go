package http

import (
	"fmt"
	"strings"
	"testing"

	"superfluid/http/anthropic"
	"superfluid/task"
)

func TestStopBoundsOnEveryAPI(t *testing.T) {
	stopsJSON := func(n, each int) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = fmt.Sprintf("%q", fmt.Sprintf("%0*d", each, i))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	long := stopsJSON(1, task.MaxStopBytes+1)
	many := stopsJSON(task.MaxStops+1, 4)
	atLimit := stopsJSON(task.MaxStops, task.MaxStopsBytes/task.MaxStops)
	overTotal := stopsJSON(anthropic.MaxStops, task.MaxStopsBytes/anthropic.MaxStops+1)
	var cases []poisonCase
	for _, api := range []struct {
		path  string
		body  func(string) string
		field string
		wrap  func(string) string
	}{
		{"/v1/chat/completions", oaiChatBody, "stop", func(v string) string { return `,"stop":` + v }},
		{"/v1/completions", oaiCmplBody, "stop", func(v string) string { return `,"stop":` + v }},
		{"/completion", llamaBody, "stop", func(v string) string { return `,"stop":` + v }},
		{"/api/generate", ollamaGenBody, "options.stop", func(v string) string { return `,"options":{"stop":` + v + `}` }},
		{"/api/chat", ollamaChatBody, "options.stop", func(v string) string { return `,"options":{"stop":` + v + `}` }},
		{"/v1/messages", anthropicBody, "stop_sequences", func(v string) string { return `,"stop_sequences":` + v }},
	} {
		cases = append(cases,
			poisonCase{path: api.path, body: api.body(api.wrap(long)), field: api.field},
			poisonCase{path: api.path, body: api.body(api.wrap(atLimit)), check: accepted},
		)
		if api.field == "stop_sequences" {
			cases = append(cases, poisonCase{path: api.path, body: api.body(api.wrap(overTotal)), field: api.field})
		} else {
			cases = append(cases, poisonCase{path: api.path, body: api.body(api.wrap(many)), field: api.field})
		}
	}
	cases = append(cases,
		poisonCase{path: "/v1/completions", body: oaiCmplBody(`,"stop":` + fmt.Sprintf("%q", strings.Repeat("x", task.MaxStopBytes+1))), field: "stop"},
		// The reproduction: 16 stops of 200,000 characters, once
		// 9.6 s and +578 MB, now refused as it is read.
		poisonCase{path: "/completion", body: llamaBody(`,"stop":` + stopsJSON(16, 200_000)), field: "stop"})
	runPoisonCases(t, cases)
}
