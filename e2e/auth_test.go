package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"superfluid/app"
	"superfluid/keys"
)

// publicRoutes answer without a key: /health (editors poll it before they
// know any key), and Ollama's probes ("/" and /api/version), which reveal
// nothing but that the server runs, and the web page's files (/ui/…): a
// browser cannot attach a key to a page load, and the page asks for the
// key when the API answers 401. A route joins this list on purpose or not
// at all.
var publicRoutes = []string{"/", "/api/version", "/health", "/ui/{id}"}

const testAPIKey = "sekret-key"

// With --api-key, every route but the public ones wants the key, as
// "Authorization: Bearer KEY" (OpenAI and Ollama clients) or
// "x-api-key: KEY" (Anthropic's); without it, or with a wrong one, the
// answer is 401 in the route's own error shape, before the body is read.
func TestAuthEveryRoute(t *testing.T) {
	o := app.Options{}
	o.HTTP.APIKey = testAPIKey
	authEveryRoute(t, startStack(t, o), testAPIKey)
}

// With a keys file, the same: any of its keys (here one given in clear
// and one by its SHA-256, neither with limits) or --api-key's passes,
// anything else is 401.
func TestAuthEveryRouteWithKeysFile(t *testing.T) {
	const inClear, byDigest = "sk-in-clear", "sk-by-digest"
	k, err := keys.Open(keys.Source(`{"keys": [{"name": "clear", "key": "`+inClear+`"}, {"name": "digest", "sha256": "`+sha256Hex([]byte(byDigest))+`"}]}`), time.Now)
	if err != nil {
		t.Fatal(err)
	}
	o := app.Options{}
	o.HTTP.APIKey, o.HTTP.Keys = testAPIKey, k
	authEveryRoute(t, startStack(t, o), testAPIKey, inClear, byDigest)
}

// authEveryRoute checks every route of st against the hostile key table,
// with each of goodKeys passing.
func authEveryRoute(t *testing.T, st *app.Stack, goodKeys ...string) {
	testAPIKey := goodKeys[0]
	for _, r := range st.Server.Routes() {
		t.Run(r.Path, func(t *testing.T) {
			var body []byte
			if r.Method == "POST" {
				// Malformed: a 400 shows the key check passed, and nothing
				// is generated.
				body = []byte(`{`)
			}
			send := func(header map[string]string) (int, []byte) {
				return sendBody(t, r.Method, st.URL()+r.Path, body, header)
			}
			if r.Public != slices.Contains(publicRoutes, r.Path) {
				t.Fatalf("public %v, but publicRoutes says %v", r.Public, !r.Public)
			}
			if r.Public {
				if status, b := send(nil); status == 401 {
					t.Errorf("public route wants a key: %s", b)
				}
				return
			}
			for name, header := range map[string]map[string]string{
				"no key":          nil,
				"wrong bearer":    {"Authorization": "Bearer nope"},
				"wrong x-api-key": {"x-api-key": "nope"},
				"key as basic":    {"Authorization": "Basic " + testAPIKey},
				"key with a tail": {"Authorization": "Bearer " + testAPIKey + "x"},
				"prefix of key":   {"x-api-key": testAPIKey[:4]},
				"empty bearer":    {"Authorization": "Bearer "},
				"key's digest":    {"x-api-key": sha256Hex([]byte(testAPIKey))},
				"key and a word":  {"Authorization": "Bearer " + testAPIKey + " x"},
				"long key":        {"x-api-key": strings.Repeat("k", 2000)},
			} {
				status, b := send(header)
				expectError(t, r.API, status, 401, b, func(e apiErrorBody) string {
					if r.API != "ollama" && e.Type != "authentication_error" {
						return name + ": type " + e.Type + ", want authentication_error"
					}
					return ""
				})
			}
			for _, key := range goodKeys {
				for name, header := range map[string]map[string]string{
					"bearer":           {"Authorization": "Bearer " + key},
					"lowercase bearer": {"authorization": "bearer " + key},
					"x-api-key":        {"x-api-key": key},
				} {
					if status, b := send(header); status == 401 || status >= 500 {
						t.Errorf("%s %s: %d %s", key, name, status, b)
					} else if r.Method == "POST" && status != 400 {
						t.Errorf("%s %s: malformed JSON got %d", key, name, status)
					}
				}
			}
		})
	}
}

// The official client sends its key as a bearer token: the right key
// lists the models, a wrong one is the client's 401 error.
func TestAuthOpenAIClient(t *testing.T) {
	o := app.Options{}
	o.HTTP.APIKey = testAPIKey
	st := startStack(t, o)
	good, bad := openaiClient(st, option.WithAPIKey(testAPIKey)), openaiClient(st, option.WithAPIKey("nope"))
	page, err := good.Models.List(context.Background())
	if err != nil || len(page.Data) != 1 {
		t.Fatalf("with the key: %v", err)
	}
	_, err = bad.Chat.Completions.New(context.Background(), greedyChat("hi", 2))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type != "authentication_error" || !strings.Contains(apiErr.Message, "key") {
		t.Fatalf("with a wrong key: %v", err)
	}
}
