package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"superfluid/app"
)

// FuzzStructuredRequests sends what costs a server more the more of it a
// request sends — GBNF grammars, JSON Schemas (nested objects, enums
// intersected, regex patterns, $ref chains, combinators), tools with
// parameter schemas, long and many stop strings, several choices —
// through every API's own field for it, to the real handlers over a real
// socket. Whatever the input, the answer comes within the client's
// timeout and is never a 5xx (a 4xx in the API's shape, or a
// generation), and the server answers /health with its lanes idle
// afterwards. The seeds are the hardening issue's findings at the sizes
// they were reproduced with.
func FuzzStructuredRequests(f *testing.F) {
	st := startStack(f, app.Options{Batch: 64})
	// A minute covers a 16-token generation under any grammar on the tiny
	// model many times over; a cost that grows with the input does not
	// fit in it at these sizes.
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{Proxy: nil}}
	base := st.URL()

	for route := range uint8(len(structuredRoutes)) {
		f.Add(route, shapeDeepGroups, uint32(60000), uint32(0), "a", uint32(0), uint8(1), false)         // grammar or pattern 60,000 deep
		f.Add(route, shapeEnumAllOf, uint32(0), uint32(20000), "v", uint32(0), uint8(1), false)          // two 20,000-value enums intersected
		f.Add(route, shapeDeepPattern, uint32(200000), uint32(0), "a", uint32(0), uint8(1), true)        // a pattern 200,000 deep
		f.Add(route, shapeLongStops, uint32(0), uint32(16), "z", uint32(200000), uint8(1), false)        // 16 stops of 200,000
		f.Add(route, shapeDeepObject, uint32(3000), uint32(0), "k", uint32(0), uint8(1), false)          // an object schema 3,000 deep
		f.Add(route, shapeDeepObject, uint32(3000), uint32(1), "t", uint32(0), uint8(1), false)          // the same as a tool's parameters
		f.Add(route, shapeRuleChain, uint32(0), uint32(80000), "r", uint32(0), uint8(1), false)          // 80,000 rules in a chain
		f.Add(route, shapeRefChain, uint32(0), uint32(5000), "d", uint32(0), uint8(2), true)             // 5,000 $refs in a chain
		f.Add(route, shapeCombinators, uint32(2000), uint32(8), "c", uint32(0), uint8(1), false)         // anyOf/oneOf 2,000 deep, 8 wide
		f.Add(route, shapeRawText, uint32(0), uint32(0), `{"type":"object"}`, uint32(0), uint8(3), true) // small and fine, several choices
	}
	f.Add(uint8(2), shapeRawText, uint32(0), uint32(0), "root ::= root", uint32(0), uint8(1), false)
	f.Add(uint8(2), shapeRawText, uint32(0), uint32(0), "root ::= [", uint32(0), uint8(1), false)
	f.Add(uint8(0), shapeRawText, uint32(0), uint32(0), `{"$ref":"#"}`, uint32(0), uint8(1), false)
	f.Add(uint8(0), shapeRawText, uint32(0), uint32(0), `{"type":"string","pattern":"(a*)*b{99999}"}`, uint32(0), uint8(1), false)
	f.Add(uint8(0), shapeRawText, uint32(0), uint32(0), `{"type":"integer","minimum":1e308,"maximum":-1e308}`, uint32(0), uint8(1), false)

	f.Fuzz(func(t *testing.T, route uint8, shape uint8, depth, count uint32, text string, stopLen uint32, n uint8, stream bool) {
		in := structuredInput{route: structuredRoutes[int(route)%len(structuredRoutes)], shape: shape % numShapes,
			depth: int(depth % 250001), count: int(count % 100001), text: text, stopLen: int(stopLen % 250001), n: int(n%4) + 1, stream: stream}
		body := in.body()
		start := time.Now()
		resp, err := client.Post(base+in.route, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s (%s, %d bytes): %v", in.route, in, len(body), err)
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("POST %s (%s): reading the answer (%d): %v", in.route, in, resp.StatusCode, err)
		}
		t.Logf("POST %s (%s, %d bytes) → %d in %v: %.200s", in.route, in, len(body), resp.StatusCode, time.Since(start).Round(time.Millisecond), answer)
		if resp.StatusCode >= 500 {
			t.Fatalf("POST %s (%s): %d %.500s", in.route, in, resp.StatusCode, answer)
		}
		if resp.StatusCode == 200 && serverErrorInStream(answer) {
			t.Fatalf("POST %s (%s): a server error inside the answer: %.500s", in.route, in, answer)
		}
		alive(t, client, base)
		checkIdle(t, base)
	})
}

// structuredRoutes are the routes that take grammars, schemas, tools or stops.
var structuredRoutes = []string{"/v1/chat/completions", "/v1/completions", "/completion", "/infill", "/api/generate", "/api/chat", "/v1/messages", "/v1/responses"}

// The shapes of hostile structure a fuzzed request carries.
const (
	shapeDeepGroups  uint8 = iota // a grammar (llama.cpp routes) or a pattern nested depth groups deep
	shapeEnumAllOf                // allOf of two count-value enums overlapping by half
	shapeDeepPattern              // a string pattern nested depth groups deep around text
	shapeLongStops                // count stops of stopLen characters
	shapeDeepObject               // an object schema nested depth properties deep
	shapeRuleChain                // a grammar (or $defs) of count rules each naming the next
	shapeRefChain                 // count $defs each a $ref to the next, the last to the first
	shapeCombinators              // anyOf/oneOf/allOf nested depth deep, count wide at the top
	shapeRawText                  // text itself as the grammar, or as the schema where it is JSON
	numShapes
)

// structuredInput is one fuzzed request before it is rendered for its route.
type structuredInput struct {
	route                    string
	shape                    uint8
	depth, count, stopLen, n int
	text                     string
	stream                   bool
}

func (in structuredInput) String() string {
	return "shape " + strconv.Itoa(int(in.shape)) + " depth " + strconv.Itoa(in.depth) + " count " + strconv.Itoa(in.count) +
		" stops " + strconv.Itoa(in.stopLen) + " n " + strconv.Itoa(in.n) + " text " + strconv.Quote(clipText(in.text, 40))
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// llamaRoute reports a route of llama.cpp's own API, the one that takes GBNF.
func (in structuredInput) llamaRoute() bool {
	return in.route == "/completion" || in.route == "/infill"
}

// body renders the input in its route's protocol.
func (in structuredInput) body() []byte {
	b := map[string]any{"stream": in.stream}
	prompt := "Answer in JSON."
	switch in.route {
	case "/v1/chat/completions":
		b["model"], b["messages"], b["max_tokens"], b["n"] = "tiny", []map[string]any{{"role": "user", "content": prompt}}, 12, in.n
	case "/v1/completions":
		b["model"], b["prompt"], b["max_tokens"], b["n"] = "tiny", prompt, 12, in.n
	case "/completion":
		b["prompt"], b["n_predict"] = prompt, 12
	case "/infill":
		b["input_prefix"], b["input_suffix"], b["prompt"], b["n_predict"] = "def f(", "):\n    pass\n", "", 12
	case "/api/generate":
		b["model"], b["prompt"], b["options"] = "tiny", prompt, map[string]any{"num_predict": 12}
	case "/api/chat":
		b["model"], b["messages"], b["options"] = "tiny", []map[string]any{{"role": "user", "content": prompt}}, map[string]any{"num_predict": 12}
	case "/v1/messages":
		b["model"], b["messages"], b["max_tokens"] = "tiny", []map[string]any{{"role": "user", "content": prompt}}, 12
	case "/v1/responses":
		b["model"], b["input"], b["max_output_tokens"], b["store"] = "tiny", prompt, 16, false
	}
	switch in.shape {
	case shapeLongStops:
		in.putStops(b)
	case shapeDeepGroups, shapeRuleChain:
		if in.llamaRoute() {
			b["grammar"] = in.grammar()
			break
		}
		in.putSchema(b, in.schema())
	case shapeRawText:
		if !json.Valid([]byte(in.text)) {
			if in.llamaRoute() {
				b["grammar"] = in.text
			} else {
				in.putSchema(b, json.RawMessage(strconv.Quote(in.text))) // a string where a schema goes: refused
			}
			break
		}
		in.putSchema(b, json.RawMessage(in.text))
	default:
		in.putSchema(b, in.schema())
	}
	out, err := json.Marshal(b)
	if err != nil {
		panic(err) // plain values and valid raw JSON
	}
	return out
}

// grammar is the GBNF a llama.cpp route carries.
func (in structuredInput) grammar() string {
	lit := strconv.Quote(in.text)
	if in.shape == shapeRuleChain {
		var g strings.Builder
		g.WriteString("root ::= r0\n")
		for i := range in.count {
			g.WriteString("r" + strconv.Itoa(i) + " ::= " + lit + " r" + strconv.Itoa(i+1) + "?\n")
		}
		g.WriteString("r" + strconv.Itoa(in.count) + " ::= " + lit + "\n")
		return g.String()
	}
	return "root ::= " + strings.Repeat("(", in.depth) + lit + strings.Repeat(")", in.depth)
}

// schema is the JSON Schema of the input's shape, written as JSON text
// (nesting that deep is cheaper to write than to build from maps).
func (in structuredInput) schema() json.RawMessage {
	name := strconv.Quote(in.text)
	var s strings.Builder
	switch in.shape {
	case shapeDeepGroups, shapeDeepPattern:
		pattern := strings.Repeat("(", in.depth) + regexAtom(in.text) + strings.Repeat(")", in.depth)
		s.WriteString(`{"type":"string","pattern":` + strconv.Quote(pattern) + `}`)
	case shapeEnumAllOf:
		enum := func(from int) {
			s.WriteString(`{"enum":[`)
			for i := range in.count {
				if i > 0 {
					s.WriteByte(',')
				}
				s.WriteString(strconv.Quote(in.text + strconv.Itoa(from+i)))
			}
			s.WriteString(`]}`)
		}
		s.WriteString(`{"allOf":[`)
		enum(0)
		s.WriteByte(',')
		enum(in.count / 2)
		s.WriteString(`]}`)
	case shapeDeepObject:
		for range in.depth {
			s.WriteString(`{"type":"object","properties":{` + name + `:`)
		}
		s.WriteString(`{"type":"string"}`)
		s.WriteString(strings.Repeat(`},"required":[`+name+`]}`, in.depth))
	case shapeRuleChain, shapeRefChain:
		s.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
		for i := range max(in.count, 1) {
			if i > 0 {
				s.WriteByte(',')
			}
			next := (i + 1) % max(in.count, 1)
			if in.shape == shapeRuleChain && i+1 == max(in.count, 1) {
				s.WriteString(`"d` + strconv.Itoa(i) + `":{"type":"string"}`)
				continue
			}
			s.WriteString(`"d` + strconv.Itoa(i) + `":{"type":"object","properties":{` + name + `:{"$ref":"#/$defs/d` + strconv.Itoa(next) + `"}}}`)
		}
		s.WriteString(`}}`)
	case shapeCombinators:
		words := []string{"anyOf", "oneOf", "allOf"}
		for i := range in.depth {
			s.WriteString(`{"` + words[i%3] + `":[{"type":"string","maxLength":3},`)
		}
		s.WriteString(`{"type":"integer"}`)
		s.WriteString(strings.Repeat(`]}`, in.depth))
		if in.count > 1 { // widen the top: count alternatives beside the nest
			inner := s.String()
			s.Reset()
			s.WriteString(`{"anyOf":[` + inner)
			for i := range in.count {
				s.WriteString(`,{"const":` + strconv.Quote(in.text+strconv.Itoa(i)) + `}`)
			}
			s.WriteString(`]}`)
		}
	}
	return json.RawMessage(s.String())
}

// regexAtom is text as a pattern's innermost piece: used as it is (it may
// be any regex, valid or not) unless it is empty.
func regexAtom(text string) string {
	if text == "" {
		return "a"
	}
	return text
}

// putSchema asks for JSON output shaped by schema (or, on a chat route,
// also offers it as a tool's parameters) in the route's own fields.
func (in structuredInput) putSchema(b map[string]any, schema json.RawMessage) {
	tools := in.count%2 == 1 // half of them go in as tools where the route takes tools
	switch in.route {
	case "/completion", "/infill":
		b["json_schema"] = schema
	case "/api/generate":
		b["format"] = schema
	case "/api/chat":
		if tools {
			b["tools"] = []map[string]any{{"type": "function", "function": map[string]any{"name": "f", "parameters": schema}}}
		} else {
			b["format"] = schema
		}
	case "/v1/messages":
		if tools {
			b["tools"] = []map[string]any{{"name": "f", "description": "fuzzed", "input_schema": schema}}
		} else {
			b["output_format"] = map[string]any{"type": "json_schema", "schema": schema}
		}
	case "/v1/responses":
		if tools {
			b["tools"] = []map[string]any{{"type": "function", "name": "f", "parameters": schema}}
		} else {
			b["text"] = map[string]any{"format": map[string]any{"type": "json_schema", "name": "f", "schema": schema}}
		}
	case "/v1/chat/completions":
		if tools {
			b["tools"] = []map[string]any{{"type": "function", "function": map[string]any{"name": "f", "parameters": schema}}}
			b["tool_choice"] = "required"
			break
		}
		fallthrough
	default:
		b["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "f", "schema": schema}}
	}
}

// putStops sets count stops of stopLen characters in the route's own field.
func (in structuredInput) putStops(b map[string]any) {
	unit := in.text
	if unit == "" {
		unit = "z"
	}
	stops := make([]string, in.count%33)
	for i := range stops {
		s := strings.Repeat(unit, in.stopLen/len(unit)+1)
		stops[i] = s[:min(len(s), max(in.stopLen, 1))] + strconv.Itoa(i)
	}
	switch in.route {
	case "/v1/messages":
		b["stop_sequences"] = stops
	case "/api/generate", "/api/chat":
		b["options"].(map[string]any)["stop"] = stops
	case "/v1/responses":
		// no stop field in the Responses API: long text in the input instead
		b["input"] = strings.Join(stops, " ")
	default:
		b["stop"] = stops
	}
}
