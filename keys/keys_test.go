package keys

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"superfluid/sched"
	"superfluid/task"
)

// clock is a virtual clock: time moves only when a test says.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                   { return &clock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)} }
func same(asked, listed string) bool     { return asked == listed }
func hexDigest(key string) string        { d := sha256.Sum256([]byte(key)); return hex.EncodeToString(d[:]) }
func keeper(t *testing.T, src string, c *clock) *Keeper {
	t.Helper()
	k, err := Open(Source(src), c.now)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

const twoKeys = `{"keys": [
  {"name": "editor", "key": "sk-editor", "classes": ["fim", "chat"], "max_lanes": 2, "requests_per_minute": 60, "tokens_per_minute": 600, "models": ["tiny"]},
  {"name": "agents", "sha256": "` + "%s" + `", "classes": ["agent", "background"]}
]}`

func twoKeysJSON() string { return strings.Replace(twoKeys, "%s", hexDigest("sk-agents"), 1) }

func TestIdentifyByKeyAndByDigest(t *testing.T) {
	k := keeper(t, twoKeysJSON(), newClock())
	for key, want := range map[string]string{"sk-editor": "editor", "sk-agents": "agents"} {
		c := k.Identify(key)
		if c == nil || c.Name() != want {
			t.Fatalf("%s: got %v, want %s", key, c, want)
		}
	}
	for _, key := range []string{"", "sk-edito", "sk-editorx", "SK-EDITOR", hexDigest("sk-agents"), "\x00"} {
		if c := k.Identify(key); c != nil {
			t.Errorf("%q identified as %s", key, c.Name())
		}
	}
}

// Each file below is refused whole, with a message that says what is wrong.
func TestParseRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ json, want string }{
		"not JSON":          {`keys: []`, "invalid character"},
		"no keys":           {`{"keys": []}`, "no keys"},
		"unknown member":    {`{"keys": [{"name": "a", "key": "k", "rpm": 3}]}`, `unknown field "rpm"`},
		"trailing text":     {`{"keys": [{"name": "a", "key": "k"}]} {}`, "after the JSON"},
		"no name":           {`{"keys": [{"key": "k"}]}`, `no "name"`},
		"bad name":          {`{"keys": [{"name": "a b", "key": "k"}]}`, "letters, digits"},
		"reserved name":     {`{"keys": [{"name": "api-key", "key": "k"}]}`, "--api-key"},
		"no key":            {`{"keys": [{"name": "a"}]}`, `no "key" or "sha256"`},
		"both":              {`{"keys": [{"name": "a", "key": "k", "sha256": "` + hexDigest("k") + `"}]}`, "not both"},
		"short digest":      {`{"keys": [{"name": "a", "sha256": "abcd"}]}`, "64 hex"},
		"key with space":    {`{"keys": [{"name": "a", "key": "k k"}]}`, "printable"},
		"same name":         {`{"keys": [{"name": "a", "key": "k"}, {"name": "a", "key": "j"}]}`, "used twice"},
		"same key":          {`{"keys": [{"name": "a", "key": "k"}, {"name": "b", "sha256": "` + hexDigest("k") + `"}]}`, "same key"},
		"unknown class":     {`{"keys": [{"name": "a", "key": "k", "classes": ["vip"]}]}`, "unknown class"},
		"empty classes":     {`{"keys": [{"name": "a", "key": "k", "classes": []}]}`, "omit it"},
		"empty models":      {`{"keys": [{"name": "a", "key": "k", "models": []}]}`, "omit it"},
		"negative limit":    {`{"keys": [{"name": "a", "key": "k", "max_lanes": -1}]}`, `"max_lanes" must be`},
		"huge limit":        {`{"keys": [{"name": "a", "key": "k", "tokens_per_minute": 1e30}]}`, "tokens_per_minute"},
		"fractional limit":  {`{"keys": [{"name": "a", "key": "k", "requests_per_minute": 1.5}]}`, "requests_per_minute"},
		"string limit":      {`{"keys": [{"name": "a", "key": "k", "requests_per_minute": "5"}]}`, "requests_per_minute"},
		"limit past bound":  {`{"keys": [{"name": "a", "key": "k", "requests_per_minute": 1000000001}]}`, "must be 0"},
		"name not a string": {`{"keys": [{"name": 5, "key": "k"}]}`, "name"},
	} {
		_, err := Parse([]byte(tc.json))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tc.want)
		}
	}
	if _, err := Parse(make([]byte, maxFileBytes+1)); err == nil {
		t.Error("an oversized file was read")
	}
}

func TestClassesAndModels(t *testing.T) {
	k := keeper(t, twoKeysJSON(), newClock())
	editor, agents := k.Identify("sk-editor"), k.Identify("sk-agents")
	r := agents.Request()
	defer r.End()
	if _, err := r.Lane(sched.Chat, 10); !isKind(err, task.Forbidden) || !strings.Contains(err.Error(), "chat class") {
		t.Fatalf("agents in chat: %v", err)
	}
	if l, err := r.Lane(sched.Background, 10); err != nil {
		t.Fatalf("agents in background: %v", err)
	} else {
		l.Settle(5, 5)
	}
	if err := editor.Embed(sched.Background, 3); !isKind(err, task.Forbidden) {
		t.Fatalf("editor embedding in background: %v", err)
	}
	if !editor.AllowsModel("tiny", same) || editor.AllowsModel("other", same) || !agents.AllowsModel("other", same) {
		t.Fatal("models: the editor key is held to tiny, the agents key to none")
	}
}

// The lane cap counts generations from admission until both the
// generation and its request have ended; the refusal is a 429 with a
// retry.
func TestLaneCap(t *testing.T) {
	k := keeper(t, twoKeysJSON(), newClock())
	editor := k.Identify("sk-editor")
	r1, r2 := editor.Request(), editor.Request()
	a, err1 := r1.Lane(sched.Chat, 1)
	_, err2 := r2.Lane(sched.FIM, 1)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	r3 := editor.Request()
	_, err := r3.Lane(sched.Chat, 1)
	if te, ok := task.AsError(err); !ok || te.Kind != task.RateLimited || te.RetryAfter <= 0 || !strings.Contains(te.Msg, "lanes") {
		t.Fatalf("third lane: %v", err)
	}
	a.Settle(1, 0) // the generation ended, its request still answers
	a.Settle(1, 0) // a second Settle changes nothing
	if _, err := r3.Lane(sched.Chat, 1); err == nil {
		t.Fatal("a lane freed before its request ended")
	}
	r1.End()
	r1.End() // nor does a second End
	c, err := r3.Lane(sched.Chat, 1)
	if err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	if _, err := r3.Lane(sched.Chat, 1); err == nil {
		t.Fatal("a double Settle or End freed two lanes")
	}
	r2.End() // the request ended first (its client left): the lane waits for its generation
	if _, err := r3.Lane(sched.Chat, 1); err == nil {
		t.Fatal("a lane freed before its generation ended")
	}
	c.Settle(0, 0)
	r3.End()

	// A generation a request starts after it has answered is freed by its
	// own end: nothing else would free it.
	late, err := r3.Lane(sched.Chat, 1)
	if err != nil {
		t.Fatal(err)
	}
	late.Settle(0, 0)
	if _, err := editor.Request().Lane(sched.Chat, 1); err != nil {
		t.Fatalf("a late lane was never freed: %v", err)
	}
}

// Requests per minute: the minute's allowance at once, then one per
// refill interval; Retry-After is exactly the wait.
func TestRequestsPerMinute(t *testing.T) {
	c := newClock()
	k := keeper(t, `{"keys": [{"name": "a", "key": "k", "requests_per_minute": 3}]}`, c)
	cl := k.Identify("k")
	for i := range 3 {
		if err := cl.Begin(); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	err := cl.Begin()
	te, ok := task.AsError(err)
	if !ok || te.Kind != task.RateLimited || te.RetryAfter != 20*time.Second {
		t.Fatalf("fourth: %v (retry %v), want a 20s retry (3 a minute)", err, te)
	}
	if q := cl.Quota(); q.Requests.Max != 3 || q.Requests.Remaining != 0 || q.Requests.Reset != time.Minute || q.Tokens.Max != 0 {
		t.Fatalf("quota %+v", q)
	}
	c.advance(19 * time.Second)
	if cl.Begin() == nil {
		t.Fatal("passed a second early")
	}
	c.advance(time.Second)
	if err := cl.Begin(); err != nil {
		t.Fatalf("after the retry: %v", err)
	}
}

// Tokens per minute: a lane is charged its estimate; its end settles
// what it took, giving back the rest.
func TestTokensPerMinuteSettle(t *testing.T) {
	c := newClock()
	k := keeper(t, `{"keys": [{"name": "a", "key": "k", "tokens_per_minute": 600}]}`, c)
	cl := k.Identify("k")
	r := cl.Request()
	defer r.End()
	l, err := r.Lane(sched.Chat, 500)
	if err != nil {
		t.Fatal(err)
	}
	if q := cl.Quota(); q.Tokens.Remaining != 100 {
		t.Fatalf("after the estimate: %+v", q.Tokens)
	}
	_, err = r.Lane(sched.Chat, 200)
	te, ok := task.AsError(err)
	if !ok || te.Kind != task.RateLimited || te.RetryAfter != 10*time.Second {
		t.Fatalf("over the tokens: %v (%+v), want a 10s retry (100 short at 10/s)", err, te)
	}
	l.Settle(50, 50) // took 100 of the 500
	if q := cl.Quota(); q.Tokens.Remaining != 500 {
		t.Fatalf("after settling: %+v", q.Tokens)
	}
	// An estimate past the whole minute needs a full bucket, then runs
	// into debt that refills.
	c.advance(10 * time.Second)
	big, err := r.Lane(sched.Chat, 1000)
	if err != nil {
		t.Fatal(err)
	}
	big.Settle(100, 1100) // took more than estimated
	if q := cl.Quota(); q.Tokens.Remaining != 0 || q.Tokens.Reset != 2*time.Minute {
		t.Fatalf("in debt: %+v", q.Tokens)
	}
}

// A reload swaps the policies; a surviving name keeps its lanes and what
// it spent; a bad file keeps the old keys.
func TestReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.json")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"keys": [{"name": "a", "key": "k1", "max_lanes": 1, "requests_per_minute": 10}, {"name": "b", "key": "k2"}]}`)
	c := newClock()
	k := keeper(t, path, c)
	a := k.Identify("k1")
	before := a.Request()
	lane, err := before.Lane(sched.Chat, 1)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		a.Begin()
	}
	write(`{"keys": [{"name": "a", "key": "k1-new", "max_lanes": 2, "requests_per_minute": 5}, {"name": "c", "key": "k3"}]}`)
	if err := k.Reload(); err != nil {
		t.Fatal(err)
	}
	if k.Identify("k1") != nil || k.Identify("k2") != nil || k.Identify("k3") == nil {
		t.Fatal("the old keys still pass or the new one does not")
	}
	a2 := k.Identify("k1-new")
	after := a2.Request()
	if q := a2.Quota(); q.Requests.Max != 5 || q.Requests.Remaining != 5 {
		t.Fatalf("requests after reload: %+v (6 of 10 left, capped at the new 5)", q.Requests)
	}
	if _, err := after.Lane(sched.Chat, 1); err != nil {
		t.Fatalf("second lane under the new cap of 2: %v", err)
	}
	if _, err := after.Lane(sched.Chat, 1); err == nil {
		t.Fatal("the lane held across the reload was forgotten")
	}
	lane.Settle(1, 0) // the lane from before the reload frees into the same state
	before.End()
	if _, err := after.Lane(sched.Chat, 1); err != nil {
		t.Fatalf("after the old lane ended: %v", err)
	}
	after.End()

	write(`{"keys": [{"name": "a", "key": "k1", "max_lanes": -3}]}`)
	if err := k.Reload(); err == nil || !strings.Contains(err.Error(), "max_lanes") || !strings.Contains(err.Error(), path) {
		t.Fatalf("bad file: %v", err)
	}
	if k.Identify("k1-new") == nil {
		t.Fatal("a bad file dropped the keys in force")
	}
	os.Remove(path)
	if err := k.Reload(); err == nil || k.Identify("k3") == nil {
		t.Fatalf("missing file: %v", err)
	}
}

func TestEstimate(t *testing.T) {
	for _, tc := range []struct{ prompt, maxTokens, ctx, want int }{
		{10, 20, 100, 30},
		{10, 0, 1000, 10 + defaultReplyEstimate},
		{90, 50, 100, 100},
		{10, 0, 0, 10 + defaultReplyEstimate},
	} {
		if got := Estimate(tc.prompt, tc.maxTokens, tc.ctx); got != tc.want {
			t.Errorf("Estimate(%d, %d, %d) = %d, want %d", tc.prompt, tc.maxTokens, tc.ctx, got, tc.want)
		}
	}
}

func TestSourceNamesInlineKeysNot(t *testing.T) {
	if s := Source(twoKeysJSON()).String(); strings.Contains(s, "sk-") {
		t.Fatalf("inline source logged as %q", s)
	}
}

func isKind(err error, k task.Kind) bool {
	te, ok := task.AsError(err)
	return ok && te.Kind == k
}

func TestRestricted(t *testing.T) {
	ps, err := Parse([]byte(`{"keys": [{"name": "free", "key": "a"}, {"name": "classes", "key": "b", "classes": ["chat", "fim", "agent", "background"]},
		{"name": "fim", "key": "c", "classes": ["fim"]}, {"name": "models", "key": "d", "models": ["x"]}, {"name": "lanes", "key": "e", "max_lanes": 1},
		{"name": "rpm", "key": "f", "requests_per_minute": 1}, {"name": "tpm", "key": "g", "tokens_per_minute": 1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		if p.Restricted() != (i >= 2) {
			t.Errorf("%s: restricted %v", p.Name, p.Restricted())
		}
	}
}

// Whatever a keys file holds, Parse answers without panicking, and what
// it accepts installs, every key with a name fit for a label and a class.
func FuzzParse(f *testing.F) {
	f.Add([]byte(twoKeysJSON()))
	f.Add([]byte(`{"keys": [{"name": "a", "key": "k", "classes": ["fim"], "models": ["m"], "max_lanes": 3}]}`))
	f.Add([]byte(`{"keys": [{"name": "a", "sha256": "` + hexDigest("x") + `", "tokens_per_minute": 1e9}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ps, err := Parse(data)
		if err != nil {
			return
		}
		k := &Keeper{src: "fuzz", now: newClock().now, states: map[string]*state{}}
		k.install(ps)
		for _, p := range ps {
			if checkName(p.Name) != nil || !p.Classes[0] && !p.Classes[1] && !p.Classes[2] && !p.Classes[3] {
				t.Fatalf("accepted %+v", p)
			}
		}
	})
}
