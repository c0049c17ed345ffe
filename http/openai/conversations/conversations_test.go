package conversations

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"superfluid/http/openai/responses"
	"superfluid/http/wire"
	"superfluid/http/wire/wiretest"
	"superfluid/session"
)

// harness runs the Conversations API's handlers over a store in a
// temporary directory, without a server.
type harness struct {
	t      *testing.T
	routes []wire.Route
	st     *responses.Store
}

func newHarness(t *testing.T) *harness {
	st, err := session.Open(t.TempDir(), session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	rs := &responses.Store{}
	rs.SetSessions(st)
	return &harness{t: t, routes: Routes(wiretest.Host{API: wire.OpenAI}, rs), st: rs}
}

// do answers method on path (a route's pattern, its {id}s given) with
// body and query, and returns the status and the decoded answer.
func (h *harness) do(method, pattern, query, body string, ids ...string) (int, map[string]any) {
	h.t.Helper()
	status, raw := h.raw(method, pattern, query, body, ids...)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		h.t.Fatalf("%s %s: %q is not a JSON object: %v", method, pattern, raw, err)
	}
	return status, out
}

// raw answers as do does, the answer's bytes undecoded.
func (h *harness) raw(method, pattern, query, body string, ids ...string) (int, []byte) {
	h.t.Helper()
	for _, r := range h.routes {
		if r.Method != method || r.Path != pattern {
			continue
		}
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(method)
		ctx.Request.SetRequestURI(pattern + "?" + query)
		ctx.Request.SetBodyString(body)
		if len(ids) > 0 {
			wire.SetPathID(&ctx, strings.Join(ids, "/"))
		}
		if err := r.Handle(&ctx, nil); err != nil {
			wire.WriteError(&ctx, wire.OpenAI, err)
		}
		return ctx.Response.StatusCode(), ctx.Response.Body()
	}
	h.t.Fatalf("no route %s %s", method, pattern)
	return 0, nil
}

// ok wants a 200 and returns the answer.
func (h *harness) ok(method, pattern, query, body string, ids ...string) map[string]any {
	h.t.Helper()
	status, out := h.do(method, pattern, query, body, ids...)
	if status != 200 {
		h.t.Fatalf("%s %s %s: status %d: %v", method, pattern, body, status, out)
	}
	return out
}

// refused wants status and an OpenAI error naming param ("" for none).
func (h *harness) refused(status int, param, method, pattern, query, body string, ids ...string) {
	h.t.Helper()
	got, out := h.do(method, pattern, query, body, ids...)
	e, _ := out["error"].(map[string]any)
	if got != status || e == nil || e["message"] == "" {
		h.t.Fatalf("%s %s %s: status %d %v, want %d", method, pattern, body, got, out, status)
	}
	if p, _ := e["param"].(string); p != param {
		h.t.Errorf("%s %s %s: param %q, want %q (%v)", method, pattern, body, p, param, e["message"])
	}
}

func ids(list map[string]any) []string {
	var out []string
	for _, it := range list["data"].([]any) {
		out = append(out, it.(map[string]any)["id"].(string))
	}
	return out
}

const items3 = `[
	{"role": "user", "content": "hi"},
	{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hello"}]},
	{"type": "function_call", "call_id": "call_1", "name": "f", "arguments": {"x": 1}}
]`

// Each item is kept in the shape OpenAI lists it in, whatever shape it
// was sent in, with an id of its type.
func TestCreateShapesItemsAsOpenAIListsThem(t *testing.T) {
	h := newHarness(t)
	c := h.ok("POST", "/v1/conversations", "", `{"items": `+items3+`, "metadata": {"topic": "demo"}}`)
	id, _ := c["id"].(string)
	if !strings.HasPrefix(id, "conv_") || c["object"] != "conversation" || c["created_at"].(float64) <= 0 || c["metadata"].(map[string]any)["topic"] != "demo" {
		t.Fatalf("conversation %v", c)
	}
	list := h.ok("GET", "/v1/conversations/{id}/items", "order=asc", "", id)
	_, got := h.raw("GET", "/v1/conversations/{id}/items", "order=asc", "", id)
	for _, want := range []string{
		`"type":"message","status":"completed","role":"user","content":[{"type":"input_text","text":"hi"}]`,
		`"role":"assistant","content":[{"type":"output_text","text":"hello","annotations":[],"logprobs":[]}]`,
		`"type":"function_call","status":"completed","call_id":"call_1","name":"f","arguments":"{\"x\": 1}"`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("items %s\nlack %s", got, want)
		}
	}
	l := ids(list)
	if len(l) != 3 || !strings.HasPrefix(l[0], "msg_") || !strings.HasPrefix(l[2], "fc_") || list["first_id"] != l[0] || list["last_id"] != l[2] || list["has_more"] != false || list["object"] != "list" {
		t.Fatalf("list %v", list)
	}
	// One item, by id, is the same object.
	it := h.ok("GET", "/v1/conversations/{id}/items/{id}", "", "", id, l[1])
	if it["id"] != l[1] || it["role"] != "assistant" {
		t.Fatalf("item %v", it)
	}
}

// Items list newest first unless asked, a page at a time after an id.
func TestListPagesBothWays(t *testing.T) {
	h := newHarness(t)
	id := h.ok("POST", "/v1/conversations", "", `{}`)["id"].(string)
	var all []string
	for i := 0; i < 5; i++ {
		added := h.ok("POST", "/v1/conversations/{id}/items", "", `{"items": [{"role": "user", "content": "m`+string(rune('0'+i))+`"}]}`, id)
		all = append(all, ids(added)...)
	}
	desc := h.ok("GET", "/v1/conversations/{id}/items", "limit=2", "", id)
	if got := ids(desc); len(got) != 2 || got[0] != all[4] || got[1] != all[3] || desc["has_more"] != true {
		t.Fatalf("first desc page %v (all %v)", desc, all)
	}
	next := h.ok("GET", "/v1/conversations/{id}/items", "limit=2&after="+all[3], "", id)
	if got := ids(next); len(got) != 2 || got[0] != all[2] || got[1] != all[1] {
		t.Fatalf("second desc page %v", got)
	}
	asc := h.ok("GET", "/v1/conversations/{id}/items", "order=asc&after="+all[2], "", id)
	if got := ids(asc); len(got) != 2 || got[0] != all[3] || got[1] != all[4] || asc["has_more"] != false {
		t.Fatalf("asc page %v", asc)
	}
}

func TestMetadataUpdateAndDelete(t *testing.T) {
	h := newHarness(t)
	id := h.ok("POST", "/v1/conversations", "", `{"metadata": {"a": "1"}}`)["id"].(string)
	c := h.ok("POST", "/v1/conversations/{id}", "", `{"metadata": {"b": "2"}}`, id)
	if m := c["metadata"].(map[string]any); m["b"] != "2" || m["a"] != nil {
		t.Fatalf("metadata replaced: %v", c)
	}
	if c := h.ok("GET", "/v1/conversations/{id}", "", "", id); c["metadata"].(map[string]any)["b"] != "2" {
		t.Fatalf("get %v", c)
	}
	d := h.ok("DELETE", "/v1/conversations/{id}", "", "", id)
	if d["id"] != id || d["object"] != "conversation.deleted" || d["deleted"] != true {
		t.Fatalf("deleted %v", d)
	}
	h.refused(404, "", "GET", "/v1/conversations/{id}", "", "", id)
}

// Fork shares the prefix up to an item; trim drops the front or the tail.
func TestForkAndTrim(t *testing.T) {
	h := newHarness(t)
	id := h.ok("POST", "/v1/conversations", "", `{"items": `+items3+`}`)["id"].(string)
	l := ids(h.ok("GET", "/v1/conversations/{id}/items", "order=asc", "", id))
	f := h.ok("POST", "/v1/conversations/{id}/fork", "", `{"item_id": "`+l[1]+`", "metadata": {"fork": "yes"}}`, id)
	fid := f["id"].(string)
	if fid == id || f["metadata"].(map[string]any)["fork"] != "yes" {
		t.Fatalf("fork %v", f)
	}
	if got := ids(h.ok("GET", "/v1/conversations/{id}/items", "order=asc", "", fid)); len(got) != 2 || got[0] != l[0] || got[1] != l[1] {
		t.Fatalf("forked items %v, want %v", got, l[:2])
	}
	// The fork grows on its own.
	h.ok("POST", "/v1/conversations/{id}/items", "", `{"items": [{"role": "user", "content": "more"}]}`, fid)
	if got := ids(h.ok("GET", "/v1/conversations/{id}/items", "", "", id)); len(got) != 3 {
		t.Fatalf("the original changed with its fork: %v", got)
	}
	h.ok("POST", "/v1/conversations/{id}/trim", "", `{"drop_first": 1}`, id)
	if got := ids(h.ok("GET", "/v1/conversations/{id}/items", "order=asc", "", id)); len(got) != 2 || got[0] != l[1] {
		t.Fatalf("after drop_first 1: %v", got)
	}
	h.ok("POST", "/v1/conversations/{id}/trim", "", `{"after": "`+l[1]+`"}`, id)
	if got := ids(h.ok("GET", "/v1/conversations/{id}/items", "order=asc", "", id)); len(got) != 1 || got[0] != l[1] {
		t.Fatalf("after trim after %s: %v", l[1], got)
	}
	// Deleting an item answers the conversation.
	c := h.ok("DELETE", "/v1/conversations/{id}/items/{id}", "", "", id, l[1])
	if c["id"] != id || c["object"] != "conversation" {
		t.Fatalf("delete item %v", c)
	}
	if got := h.ok("GET", "/v1/conversations/{id}/items", "", "", id); len(got["data"].([]any)) != 0 || got["first_id"] != nil {
		t.Fatalf("emptied %v", got)
	}
}

// Bad bodies, queries and ids are 400s naming the parameter; unknown ids
// are 404s.
func TestRefusals(t *testing.T) {
	h := newHarness(t)
	id := h.ok("POST", "/v1/conversations", "", `{"items": [{"role": "user", "content": "hi"}]}`)["id"].(string)
	item := ids(h.ok("GET", "/v1/conversations/{id}/items", "", "", id))[0]
	many := "[" + strings.Repeat(`{"role":"user","content":"x"},`, 20) + `{"role":"user","content":"x"}]`
	bigMeta := `{` + strings.Repeat(`"k`, 1)
	for i := 0; i < 17; i++ {
		if i > 0 {
			bigMeta += `,"k`
		}
		bigMeta += string(rune('a'+i)) + `":"v"`
	}
	bigMeta += "}"
	for _, c := range []struct {
		status                       int
		param, method, path, q, body string
		ids                          []string
	}{
		{400, "items", "POST", "/v1/conversations", "", `{"items": [{"role": "robot", "content": "x"}]}`, nil},
		{400, "items", "POST", "/v1/conversations", "", `{"items": [{"type": "image_generation_call"}]}`, nil},
		{400, "items", "POST", "/v1/conversations", "", `{"items": [{"type": "function_call", "name": "f"}]}`, nil},
		{400, "items", "POST", "/v1/conversations", "", `{"items": [{"role": "user", "content": [{"type": "input_image"}]}]}`, nil},
		{400, "items", "POST", "/v1/conversations", "", `{"items": ` + many + `}`, nil},
		{400, "items", "POST", "/v1/conversations", "", `{"items": {"role": "user"}}`, nil},
		{400, "metadata", "POST", "/v1/conversations", "", `{"metadata": {"a": 1}}`, nil},
		{400, "metadata", "POST", "/v1/conversations", "", `{"metadata": ` + bigMeta + `}`, nil},
		{400, "metadata", "POST", "/v1/conversations", "", `{"metadata": {"a": "` + strings.Repeat("v", 513) + `"}}`, nil},
		{400, "store", "POST", "/v1/conversations", "", `{"store": true}`, nil},
		{400, "", "POST", "/v1/conversations", "", `[1]`, nil},
		{400, "", "POST", "/v1/conversations", "", `{"items": [`, nil},
		{400, "metadata", "POST", "/v1/conversations/{id}", "", `{}`, []string{id}},
		{400, "items", "POST", "/v1/conversations/{id}/items", "", `{"items": []}`, []string{id}},
		{400, "conversation_id", "GET", "/v1/conversations/{id}", "", "", []string{"resp_1"}},
		{400, "conversation_id", "GET", "/v1/conversations/{id}", "", "", []string{"conv_" + strings.Repeat("a", 80)}},
		{400, "conversation_id", "GET", "/v1/conversations/{id}", "", "", []string{"conv_a%2e"}},
		{400, "limit", "GET", "/v1/conversations/{id}/items", "limit=0", "", []string{id}},
		{400, "limit", "GET", "/v1/conversations/{id}/items", "limit=101", "", []string{id}},
		{400, "limit", "GET", "/v1/conversations/{id}/items", "limit=1e3", "", []string{id}},
		{400, "order", "GET", "/v1/conversations/{id}/items", "order=up", "", []string{id}},
		{400, "include", "GET", "/v1/conversations/{id}/items", "include[]=message.output_text.logprobs", "", []string{id}},
		{400, "include", "GET", "/v1/conversations/{id}/items", "include=everything", "", []string{id}},
		{400, "", "POST", "/v1/conversations/{id}/trim", "", `{}`, []string{id}},
		{400, "", "POST", "/v1/conversations/{id}/trim", "", `{"drop_first": 1, "after": "` + item + `"}`, []string{id}},
		{400, "drop_first", "POST", "/v1/conversations/{id}/trim", "", `{"drop_first": -1}`, []string{id}},
		{400, "drop_first", "POST", "/v1/conversations/{id}/trim", "", `{"drop_first": 1.5}`, []string{id}},
		{400, "drop_first", "POST", "/v1/conversations/{id}/trim", "", `{"drop_first": 1e300}`, []string{id}},
		{400, "item_id", "POST", "/v1/conversations/{id}/fork", "", `{"item_id": 3}`, []string{id}},
		{404, "", "GET", "/v1/conversations/{id}", "", "", []string{"conv_nope"}},
		{404, "", "DELETE", "/v1/conversations/{id}", "", "", []string{"conv_nope"}},
		{404, "", "GET", "/v1/conversations/{id}/items", "", "", []string{"conv_nope"}},
		{404, "", "GET", "/v1/conversations/{id}/items", "after=msg_nope", "", []string{id}},
		{404, "", "POST", "/v1/conversations/{id}/items", "", `{"items": [{"role": "user", "content": "x"}]}`, []string{"conv_nope"}},
		{404, "", "GET", "/v1/conversations/{id}/items/{id}", "", "", []string{id, "msg_nope"}},
		{404, "", "GET", "/v1/conversations/{id}/items/{id}", "", "", []string{"conv_nope", item}},
		{404, "", "DELETE", "/v1/conversations/{id}/items/{id}", "", "", []string{id, "msg_nope"}},
		{404, "", "POST", "/v1/conversations/{id}/fork", "", `{"item_id": "msg_nope"}`, []string{id}},
		{404, "", "POST", "/v1/conversations/{id}/trim", "", `{"after": "msg_nope"}`, []string{id}},
	} {
		h.refused(c.status, c.param, c.method, c.path, c.q, c.body, c.ids...)
	}
	// Nothing refused changed the conversation.
	if got := ids(h.ok("GET", "/v1/conversations/{id}/items", "", "", id)); len(got) != 1 || got[0] != item {
		t.Fatalf("items after the refusals: %v", got)
	}
}

// Without a data directory there is no store: a valid request is told so
// (404 conversations_off), a malformed one still gets its 400.
func TestNoStore(t *testing.T) {
	h := &harness{t: t, routes: Routes(wiretest.Host{API: wire.OpenAI}, &responses.Store{})}
	status, out := h.do("POST", "/v1/conversations", "", `{}`)
	if e, _ := out["error"].(map[string]any); status != 404 || e["code"] != "conversations_off" {
		t.Fatalf("no store: %d %v", status, out)
	}
	h.refused(400, "", "POST", "/v1/conversations", "", `{`)
	h.refused(400, "conversation_id", "GET", "/v1/conversations/{id}", "", "", "{id}")
}

// While a turn runs in a conversation, the changes to it wait their turn
// (409); reading it does not.
func TestChangesWhileATurnRuns(t *testing.T) {
	h := newHarness(t)
	id := h.ok("POST", "/v1/conversations", "", `{"items": [{"role": "user", "content": "hi"}]}`)["id"].(string)
	item := ids(h.ok("GET", "/v1/conversations/{id}/items", "", "", id))[0]
	release, err := h.st.Claim(id)
	if err != nil {
		t.Fatal(err)
	}
	h.refused(409, "conversation", "POST", "/v1/conversations/{id}/items", "", `{"items": [{"role": "user", "content": "x"}]}`, id)
	h.refused(409, "conversation", "DELETE", "/v1/conversations/{id}/items/{id}", "", "", id, item)
	h.refused(409, "conversation", "POST", "/v1/conversations/{id}/trim", "", `{"drop_first": 1}`, id)
	h.refused(409, "conversation", "DELETE", "/v1/conversations/{id}", "", "", id)
	h.ok("GET", "/v1/conversations/{id}/items", "", "", id)
	h.ok("POST", "/v1/conversations/{id}/fork", "", `{}`, id)
	release()
	h.ok("POST", "/v1/conversations/{id}/items", "", `{"items": [{"role": "user", "content": "x"}]}`, id)
}
