package chat

// knownDeviations are the renderings TestGoldens expects to differ from the
// reference, each with the reason: all are places where Python's jinja2 is
// stricter than the engine (github.com/ardanlabs/jinja v1.8.0) and none can
// be reached from outside it. The reference refuses each of these
// conversations with a Python error, never with the template's own
// raise_exception; here they render. A listed rendering that starts to
// match fails the test, so the list cannot go stale.
var knownDeviations = map[string]string{
	"CohereForAI-c4ai-command-r-plus-tool_use.tool":  "a missing attribute (tool.description) used in +: Python's Undefined raises, the engine's is an empty string",
	"CohereForAI-c4ai-command-r-plus-tool_use.tool2": "a missing attribute (tool.description) used in +: Python's Undefined raises, the engine's is an empty string",
	"fireworks-ai-llama-3-firefunction-v2.plain":     "an undefined variable (functions) used: Python's Undefined raises, the engine's is an empty string",
	"fireworks-ai-llama-3-firefunction-v2.tool":      "an undefined variable (functions) used: Python's Undefined raises, the engine's is an empty string",
	"fireworks-ai-llama-3-firefunction-v2.tool2":     "an undefined variable (functions) used: Python's Undefined raises, the engine's is an empty string",
	"llama-cpp-deepseek-r1.tool":                     "tools|map(...)|tojson: Python's map filter yields a generator json.dumps refuses, the engine's yields a list",
	"llama-cpp-deepseek-r1.tool2":                    "tools|map(...)|tojson: Python's map filter yields a generator json.dumps refuses, the engine's yields a list",
	"meetkai-functionary-medium-v3.2.tool":           "str + dict (arguments as an object): Python raises TypeError, the engine concatenates",
	"meetkai-functionary-medium-v3.2.tool2":          "str + dict (arguments as an object): Python raises TypeError, the engine concatenates",
	"meetkai-functionary-medium-v3.1.tool":           `"..."|safe + json: Python's Markup HTML-escapes the JSON (&#34;), the engine has no Markup type`,
	"meetkai-functionary-medium-v3.1.tool2":          `"..."|safe + json: Python's Markup HTML-escapes the JSON (&#34;), the engine has no Markup type`,
}
