package bench

import (
	"encoding/json"
	"strings"
)

// The soak's hostile inputs: requests whose cost inside a server grows
// with what they send (a grammar nested tens of thousands of groups deep,
// two huge enums intersected, a regex pattern nested as deep, stop strings
// of hundreds of kilobytes, a tool whose parameter schema nests past any
// real one), and requests a web page would send (a cross-site Origin, a
// rebound Host). A server must answer each promptly — refused with a 4xx,
// or served where it can serve it cheaply — and the cross-site ones must
// be refused with 403 whatever else they hold.

const (
	hostileDeepGrammar      = "grammar-60000-deep"
	hostileEnumIntersection = "schema-enum-20000-allof"
	hostileDeepPattern      = "schema-pattern-200000-deep"
	hostileLongStops        = "stops-16x200000"
	hostileDeepToolSchema   = "tool-schema-2000-deep"
	hostileCrossOrigin      = "cross-site-origin"
	hostileReboundHost      = "rebound-host"
)

// The sizes the hardening issue reproduced its findings with.
const (
	deepGrammarLevels = 60000
	enumValues        = 20000
	deepPatternLevels = 200000
	longStopCount     = 16
	longStopChars     = 200000
	deepToolLevels    = 2000 // 4,000 JSON levels: under a JSON decoder's own bound, so the schema reaches the converter
)

// crossSiteOrigin is a page on another site; reboundHost is the Host such a
// page's requests carry after DNS rebinding points its name at loopback.
const (
	crossSiteOrigin = "http://evil.example"
	reboundHost     = "evil.example"
)

// mustBeForbidden reports a poison a server must answer 403 and nothing else.
func mustBeForbidden(poison string) bool {
	return poison == hostileCrossOrigin || poison == hostileReboundHost
}

// hostilePoisons are the hostile inputs ep can carry: each goes where its
// API takes it.
func hostilePoisons(ep soakEndpoint) []string {
	ps := []string{hostileLongStops, hostileCrossOrigin, hostileReboundHost}
	switch ep.path {
	case "/completion", "/infill":
		ps = append(ps, hostileDeepGrammar, hostileEnumIntersection, hostileDeepPattern)
	case "/v1/chat/completions", "/api/chat", "/api/generate":
		ps = append(ps, hostileEnumIntersection, hostileDeepPattern)
	}
	switch ep.path {
	case "/v1/chat/completions", "/api/chat", "/v1/messages":
		ps = append(ps, hostileDeepToolSchema)
	}
	return ps
}

// addHostile puts poison into b, a body of ep's protocol.
func addHostile(b map[string]any, ep soakEndpoint, poison string) {
	switch poison {
	case hostileDeepGrammar:
		b["grammar"] = deepGrammar(deepGrammarLevels)
	case hostileEnumIntersection:
		putSchema(b, ep, enumIntersection(enumValues))
	case hostileDeepPattern:
		putSchema(b, ep, map[string]any{"type": "string", "pattern": strings.Repeat("(", deepPatternLevels) + "a" + strings.Repeat(")", deepPatternLevels)})
	case hostileLongStops:
		stops := make([]string, longStopCount)
		for i := range stops {
			stops[i] = strings.Repeat(string(rune('a'+i)), longStopChars)
		}
		switch ep.family {
		case "anthropic":
			b["stop_sequences"] = stops
		case "ollama":
			if o, ok := b["options"].(map[string]any); ok {
				o["stop"] = stops
			}
		default:
			b["stop"] = stops
		}
	case hostileDeepToolSchema:
		params := deepObjectSchema(deepToolLevels)
		switch ep.family {
		case "anthropic":
			b["tools"] = []map[string]any{{"name": "nest", "description": "deep", "input_schema": params}}
		default:
			b["tools"] = []map[string]any{{"type": "function", "function": map[string]any{"name": "nest", "description": "deep", "parameters": params}}}
		}
	}
}

// hostileHeaders are the headers poison sends beside its body.
func hostileHeaders(poison string) map[string]string {
	switch poison {
	case hostileCrossOrigin:
		return map[string]string{"Origin": crossSiteOrigin}
	case hostileReboundHost:
		return map[string]string{"Host": reboundHost}
	}
	return nil
}

// putSchema asks for JSON output shaped by schema in ep's own field.
func putSchema(b map[string]any, ep soakEndpoint, schema map[string]any) {
	switch ep.family {
	case "llamacpp":
		b["json_schema"] = schema
	case "ollama":
		b["format"] = schema
	default:
		b["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "hostile", "schema": schema}}
	}
}

// deepGrammar is a GBNF grammar whose one rule nests levels groups deep.
func deepGrammar(levels int) string {
	return "root ::= " + strings.Repeat("(", levels) + `"a"` + strings.Repeat(")", levels)
}

// enumIntersection is a schema that must hold two n-value enums at once,
// overlapping by half.
func enumIntersection(n int) map[string]any {
	a, b := make([]int, n), make([]int, n)
	for i := range n {
		a[i], b[i] = i, i+n/2
	}
	return map[string]any{"allOf": []any{map[string]any{"enum": a}, map[string]any{"enum": b}}}
}

// deepObjectSchema is an object schema nested levels properties deep,
// written as JSON text rather than built from nested maps.
func deepObjectSchema(levels int) json.RawMessage {
	var s strings.Builder
	for range levels {
		s.WriteString(`{"type":"object","properties":{"x":`)
	}
	s.WriteString(`{"type":"string"}`)
	for range levels {
		s.WriteString(`}}`)
	}
	return json.RawMessage(s.String())
}
