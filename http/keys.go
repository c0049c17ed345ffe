package http

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"superfluid/http/wire"
	"superfluid/keys"
	"superfluid/task"
)

// identify reads the key a request presents ("x-api-key: KEY", else
// "Authorization: Bearer KEY") and finds whose it is: ok when no key is
// required, or when it is --api-key's (client nil: no limits) or one of
// the keys file's (client set: its policy holds).
func (s *Server) identify(h *fasthttp.RequestHeader) (client *keys.Client, ok bool) {
	if s.cfg.APIKey == "" && s.cfg.Keys == nil {
		return nil, true
	}
	key := presentedKey(h)
	if s.cfg.APIKey != "" && sameKey(key, s.cfg.APIKey) {
		return nil, true
	}
	if s.cfg.Keys == nil {
		return nil, false
	}
	client = s.cfg.Keys.Identify(key)
	return client, client != nil
}

// sameKey compares two keys in constant time: both are hashed to one
// length first, so not even a key's length shows in the timing.
func sameKey(a, b string) bool {
	da, db := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(da[:], db[:]) == 1
}

// presentedKey is the key in a request's headers, "" for none.
func presentedKey(h *fasthttp.RequestHeader) string {
	key := string(h.Peek("x-api-key"))
	if auth := string(h.Peek("Authorization")); key == "" && len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
		key = strings.TrimSpace(auth[7:])
	}
	return key
}

// keyRequestKey is the RequestCtx user value holding the request's
// *keys.Request (a keys file's key's hold on the lanes it starts).
type keyRequestKey struct{}

// keyedModel is m as a handler gets it: for a request with a keys file's
// key, a copy whose scheduler and embedder admit each generation and
// embedding by the key's policy first. Every generation an API starts
// goes through its model's Submit, so this one place holds every API to
// the class, lane and token limits.
func keyedModel(ctx *fasthttp.RequestCtx, m *task.Model) *task.Model {
	kreq, _ := ctx.UserValue(keyRequestKey{}).(*keys.Request)
	if kreq == nil {
		return m
	}
	km := *m
	if km.Sched != nil {
		ctxLen := 0
		if km.Desc != nil {
			ctxLen = km.Desc.Ctx
		}
		km.Sched = keys.Scheduler(km.Sched, kreq, ctxLen)
	}
	if km.Embed != nil {
		km.Embed = keys.Embedder(km.Embed, kreq.Client())
	}
	return &km
}

// setRateHeaders adds a limited key's rate-limit headers to any answer in
// the API's own names: OpenAI's x-ratelimit-* (reset as a duration),
// Anthropic's anthropic-ratelimit-* (reset as an RFC 3339 time). Ollama
// and llama.cpp have none of their own: a 429 carries Retry-After alone
// (wire.WriteError sets it on every API's 429).
func setRateHeaders(ctx *fasthttp.RequestCtx, kind wire.API, client *keys.Client) {
	if kind != wire.OpenAI && kind != wire.Anthropic {
		return
	}
	q := client.Quota()
	now := client.Now()
	h := &ctx.Response.Header
	for _, l := range []struct {
		what  string
		limit keys.Limit
	}{{"requests", q.Requests}, {"tokens", q.Tokens}} {
		if l.limit.Max == 0 {
			continue
		}
		limit, remaining := strconv.Itoa(l.limit.Max), strconv.Itoa(l.limit.Remaining)
		if kind == wire.OpenAI {
			h.Set("x-ratelimit-limit-"+l.what, limit)
			h.Set("x-ratelimit-remaining-"+l.what, remaining)
			h.Set("x-ratelimit-reset-"+l.what, openAIDuration(l.limit.Reset))
			continue
		}
		h.Set("anthropic-ratelimit-"+l.what+"-limit", limit)
		h.Set("anthropic-ratelimit-"+l.what+"-remaining", remaining)
		h.Set("anthropic-ratelimit-"+l.what+"-reset", now.Add(l.limit.Reset).UTC().Format(time.RFC3339))
	}
}

// openAIDuration writes a reset the way OpenAI's headers do: "1s",
// "6m0s", "0s" — Go's duration syntax at whole seconds (rounded up, so a
// client that waits it finds the bucket full).
func openAIDuration(d time.Duration) string {
	return ((d + time.Second - 1) / time.Second * time.Second).String()
}

// startKeyed charges a keys file's key for the request (its requests per
// minute), refuses a route whose work would escape its policy, and starts
// the request's hold on the lanes its generations take (keyedModel).
func startKeyed(ctx *fasthttp.RequestCtx, r route, client *keys.Client) (*keys.Request, error) {
	if err := client.Begin(); err != nil {
		return nil, err
	}
	if err := beyondPolicy(r, client); err != nil {
		return nil, err
	}
	kreq := client.Request()
	ctx.SetUserValue(keyRequestKey{}, kreq)
	return kreq, nil
}

// beyondPolicy refuses a route whose work escapes the key's policy
// (beyondPolicyRoutes) to a key that has one.
func beyondPolicy(r route, client *keys.Client) error {
	if !r.beyondPolicy || !client.Policy().Restricted() {
		return nil
	}
	what := "a batch runs in the background outside any key's limits"
	if r.kind == wire.Ollama {
		what = "pulling or deleting changes the models every key sees"
	}
	return &wire.Error{Status: fasthttp.StatusForbidden, Type: "permission_error", Code: "key_restricted",
		Msg: fmt.Sprintf("API key %q has a policy (classes, models or limits), and %s: only a key without one may do this", client.Name(), what)}
}

// visibleModel reports whether the request ctx may see the model called
// name in a listing: any model, unless its key's policy lists models.
func visibleModel(ctx *fasthttp.RequestCtx, name string) bool {
	if ctx == nil {
		return true // the server's own view (the status's throughput sampler)
	}
	kreq, _ := ctx.UserValue(keyRequestKey{}).(*keys.Request)
	return kreq == nil || kreq.Client().AllowsModel(name, SameModelName)
}
