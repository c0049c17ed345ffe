package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Issue 26's crash test against the real process: `superfluid serve` on
// one --data-dir, SIGKILLed at a seeded random moment of a stream of
// conversation appends from a few concurrent clients, round after round.
// After every restart the API must show every acknowledged item, with its
// content, in the order its client sent it; of what was not acknowledged
// only a client's in-flight request may show, and then whole.

// crashRounds is 100, the count. The store's size is bounded (a
// conversation past crashRetireItems is deleted, through the API, before
// the next round's appends), so that a start's replay and its check stay
// flat rather than growing with every round: unbounded, 100 rounds took
// 82 s on this machine, the check and the replay growing each round.
const (
	crashRounds      = 100
	crashRetireItems = 1000
)

// crashWant is one item a conversation should hold: id is "" until the
// server has shown it (an unacknowledged append's items); group ties
// together the items of one unacknowledged append, which are all present
// or all absent.
type crashWant struct {
	id, text string
	group    int // 0: acknowledged
}

type crashConv struct {
	id    string
	items []crashWant
}

// crashItem is the one item shape the test writes and reads back.
type crashItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
}

func (it crashItem) text() (string, bool) {
	if it.Type != "message" || it.Role != "user" || len(it.Content) != 1 || it.Content[0].Type != "input_text" {
		return "", false
	}
	return it.Content[0].Text, true
}

func crashItemsBody(texts []string) []byte {
	items := make([]map[string]string, len(texts))
	for i, s := range texts {
		items[i] = map[string]string{"type": "message", "role": "user", "content": s}
	}
	b, _ := json.Marshal(map[string]any{"items": items})
	return b
}

// crashClient appends to its own conversation (creating it first when
// conv.id is "") until a request fails, which the kill makes happen.
type crashClient struct {
	url    string
	http   *http.Client
	rng    *rand.Rand
	name   string // round and client, in every text it writes
	conv   *crashConv
	group  int    // the group of its in-flight items, when unacknowledged
	failed string // a refusal while the server was up: the test fails
}

// do POSTs body to path and decodes an acknowledged answer into out; ok
// is false when the request or its answer was cut (the server killed).
func (c *crashClient) do(path string, body []byte, out any) (ok bool) {
	resp, err := c.http.Post(c.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return false
	}
	if resp.StatusCode != http.StatusOK {
		c.failed = fmt.Sprintf("POST %s: %d %s", path, resp.StatusCode, raw)
		return false
	}
	if err := json.Unmarshal(raw, out); err != nil {
		c.failed = fmt.Sprintf("POST %s: %v in %s", path, err, raw)
		return false
	}
	return true
}

func (c *crashClient) run() {
	pad := strings.Repeat("p", c.rng.IntN(300))
	for k := 0; ; k++ {
		texts := make([]string, 1+c.rng.IntN(3))
		for i := range texts {
			texts[i] = fmt.Sprintf("%s k%d i%d %s", c.name, k, i, pad[:c.rng.IntN(len(pad)+1)])
		}
		body := crashItemsBody(texts)
		if c.conv.id == "" {
			var created struct {
				ID string `json:"id"`
			}
			if !c.do("/v1/conversations", body, &created) {
				return // a conversation we never learnt the id of: not checked
			}
			if created.ID == "" {
				c.failed = "create: no id"
				return
			}
			c.conv.id = created.ID
			// The create's items are acknowledged with it; their ids come
			// with the first check.
			for _, s := range texts {
				c.conv.items = append(c.conv.items, crashWant{text: s})
			}
			continue
		}
		var added struct {
			Data []crashItem `json:"data"`
		}
		if !c.do("/v1/conversations/"+c.conv.id+"/items", body, &added) {
			for _, s := range texts {
				c.conv.items = append(c.conv.items, crashWant{text: s, group: c.group})
			}
			return
		}
		if len(added.Data) != len(texts) {
			c.failed = fmt.Sprintf("append of %d items acknowledged %d", len(texts), len(added.Data))
			return
		}
		for i, it := range added.Data {
			if s, ok := it.text(); !ok || s != texts[i] || it.ID == "" {
				c.failed = fmt.Sprintf("append acknowledged %+v for %q", it, texts[i])
				return
			}
			c.conv.items = append(c.conv.items, crashWant{id: it.ID, text: texts[i]})
		}
	}
}

// crashList reads a conversation's items, oldest first, page by page.
func crashList(t *testing.T, base, id string) []crashItem {
	t.Helper()
	var all []crashItem
	after := ""
	for {
		u := base + "/v1/conversations/" + id + "/items?order=asc&limit=100"
		if after != "" {
			u += "&after=" + url.QueryEscape(after)
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatalf("list %s: %v", id, err)
		}
		var page struct {
			Data    []crashItem `json:"data"`
			HasMore bool        `json:"has_more"`
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("list %s: %d %s", id, resp.StatusCode, raw)
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			t.Fatalf("list %s: %v", id, err)
		}
		all = append(all, page.Data...)
		if !page.HasMore || len(page.Data) == 0 {
			return all
		}
		after = page.Data[len(page.Data)-1].ID
	}
}

// crashCheck holds each conversation against what its clients were told:
// the acknowledged items in order, each exact; an unacknowledged append's
// items all there (then they are kept, as acknowledged, for the next
// checks: they are durable now) or all gone; nothing else.
func crashCheck(t *testing.T, base string, convs []*crashConv, when string) (items int) {
	t.Helper()
	for _, c := range convs {
		got := crashList(t, base, c.id)
		var kept []crashWant
		present := map[int]bool{} // group → shown
		absent := map[int]bool{}
		j := 0
		for _, w := range c.items {
			var s string
			ok := false
			if j < len(got) {
				s, ok = got[j].text()
			}
			switch {
			case ok && s == w.text && (w.id == "" || w.id == got[j].ID):
				kept = append(kept, crashWant{id: got[j].ID, text: w.text})
				present[w.group] = true
				j++
			case w.group != 0:
				absent[w.group] = true
			default:
				at := "the end of the list"
				if j < len(got) {
					at = fmt.Sprintf("%+v", got[j])
				}
				t.Fatalf("%s: conversation %s lost acknowledged item %q (id %q); found %s", when, c.id, w.text, w.id, at)
			}
		}
		if j != len(got) {
			t.Fatalf("%s: conversation %s holds %d items nobody sent or out of order, first %+v", when, c.id, len(got)-j, got[j])
		}
		for g := range present {
			if g != 0 && absent[g] {
				t.Fatalf("%s: conversation %s holds part of an unacknowledged append (group %d)", when, c.id, g)
			}
		}
		c.items = kept
		items += len(kept)
	}
	return items
}

// crashServeClean fails on a start that did not open the stores cleanly:
// a store it refused runs the server without conversations (or with
// responses in memory) and says so in a warning.
func crashServeClean(t *testing.T, p *serveProc, when string) {
	t.Helper()
	log := p.stderr.String()
	for _, bad := range []string{"level=ERROR", "conversations are off", "in memory only", "hold their whole conversations"} {
		if strings.Contains(log, bad) {
			t.Fatalf("%s: serve logged %q:\n%s", when, bad, log)
		}
	}
}

// crashStoreMetric reads one of the conversations' store's metrics from
// /metrics ("" when it is not there).
func crashStoreMetric(t testing.TB, base, name string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, `store="conversations"`) {
			return line[strings.LastIndexByte(line, ' ')+1:]
		}
	}
	return ""
}

func TestServeProcessConversationsSurviveSIGKILL(t *testing.T) {
	superfluidBinary(t) // built before the clock starts
	dataDir := t.TempDir()
	args := []string{"--model", tinyModel(t), "--port", "0", "--park-dir", "off", "--data-dir", dataDir, "--threads", "1", "--ctx", "512"}
	rng := rand.New(rand.NewPCG(26, 2))
	var convs []*crashConv
	var deleted []string // conversations deleted (acknowledged) in earlier rounds
	var startup, total time.Duration
	acked, torn, group := 0, 0, 0
	for round := 0; round <= crashRounds; round++ {
		began := time.Now()
		p := startServe(t, nil, args...)
		startup += time.Since(began)
		when := fmt.Sprintf("start %d", round)
		crashServeClean(t, p, when)
		acked = crashCheck(t, p.url, convs, when)
		if s := crashStoreMetric(t, p.url, "superfluid_session_failed"); s != "0" {
			t.Fatalf("%s: the conversations' store failed (%q)", when, s)
		}
		if s := crashStoreMetric(t, p.url, "superfluid_session_torn_tails_total"); s != "0" {
			torn++
		}
		for _, id := range deleted {
			resp, err := http.Get(p.url + "/v1/conversations/" + id)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("%s: deleted conversation %s answers %d", when, id, resp.StatusCode)
			}
		}
		if round == crashRounds {
			break
		}
		// Retire the big conversations: a DELETE acknowledged is a delete
		// that must outlast every later kill.
		live := convs[:0]
		for _, c := range convs {
			if len(c.items) <= crashRetireItems {
				live = append(live, c)
				continue
			}
			req, _ := http.NewRequest("DELETE", p.url+"/v1/conversations/"+c.id, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: delete %s: %d", when, c.id, resp.StatusCode)
			}
			deleted = append(deleted, c.id)
		}
		convs = live

		// 2–4 clients, each on its own conversation: a new one, or one of
		// the earlier rounds' that no other client of this round has.
		clients := make([]*crashClient, 2+rng.IntN(3))
		order := rng.Perm(len(convs))
		for i := range clients {
			conv := &crashConv{}
			if len(order) > 0 && rng.IntN(4) != 0 {
				conv, order = convs[order[0]], order[1:]
			} else {
				convs = append(convs, conv)
			}
			group++
			clients[i] = &crashClient{
				url: p.url, conv: conv, group: group,
				http: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}},
				rng:  rand.New(rand.NewPCG(26, uint64(round*8+i))),
				name: fmt.Sprintf("r%d c%d", round, i),
			}
		}
		var wg sync.WaitGroup
		for _, c := range clients {
			wg.Add(1)
			go func() { defer wg.Done(); c.run() }()
		}
		time.Sleep(time.Duration(3_000+rng.IntN(297_000)) * time.Microsecond)
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-p.exited
		wg.Wait()
		for _, c := range clients {
			c.http.CloseIdleConnections()
			if c.failed != "" {
				t.Fatalf("round %d, %s: %s", round, c.name, c.failed)
			}
		}
		// Conversations whose create was cut are not the test's to check.
		live = convs[:0]
		for _, c := range convs {
			if c.id != "" {
				live = append(live, c)
			}
		}
		convs = live
		total += time.Since(began)
	}
	t.Logf("%d rounds in %v (%v a round, start-up %v of it); %d conversations with %d items at the end, %d deleted; %d starts dropped a torn tail",
		crashRounds, total.Round(time.Millisecond), (total / crashRounds).Round(time.Millisecond), (startup / (crashRounds + 1)).Round(time.Millisecond), len(convs), acked, len(deleted), torn)
}

// BenchmarkServeProcessConversationsStartup measures what a store of
// 1,000 conversations × 50 items costs a start of `serve`: from exec to
// its "ready" line, against an empty data directory, after a SIGKILL
// (the log replayed) and after a graceful stop (SIGTERM).
//
//	go test ./e2e/ -run '^$' -bench BenchmarkServeProcessConversationsStartup -benchtime 1x
func BenchmarkServeProcessConversationsStartup(b *testing.B) {
	const convs, perConv = 1000, 50
	superfluidBinary(b)
	for range b.N {
		dataDir := b.TempDir()
		args := []string{"--model", tinyModel(b), "--port", "0", "--park-dir", "off", "--data-dir", dataDir, "--threads", "1", "--ctx", "512"}
		timedStart := func() (*serveProc, time.Duration) {
			began := time.Now()
			p := startServe(b, nil, args...)
			return p, time.Since(began)
		}
		p, empty := timedStart()
		fill := time.Now()
		ids := make(chan int)
		var wg sync.WaitGroup
		var failMu sync.Mutex
		var failed string
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := &crashClient{url: p.url, http: &http.Client{Timeout: time.Minute}}
				for n := range ids {
					texts := make([]string, perConv)
					for i := range texts {
						texts[i] = fmt.Sprintf("conversation %d item %d: %s", n, i, strings.Repeat("x", 100))
					}
					var created struct {
						ID string `json:"id"`
					}
					ok := c.do("/v1/conversations", crashItemsBody(texts[:20]), &created)
					var added struct{ Data []crashItem }
					ok = ok && c.do("/v1/conversations/"+created.ID+"/items", crashItemsBody(texts[20:40]), &added)
					ok = ok && c.do("/v1/conversations/"+created.ID+"/items", crashItemsBody(texts[40:]), &added)
					if !ok {
						failMu.Lock()
						failed = fmt.Sprintf("filling conversation %d: %s", n, c.failed)
						failMu.Unlock()
					}
				}
			}()
		}
		for n := range convs {
			ids <- n
		}
		close(ids)
		wg.Wait()
		if failed != "" {
			b.Fatal(failed)
		}
		filled := time.Since(fill)
		if err := p.cmd.Process.Kill(); err != nil {
			b.Fatal(err)
		}
		<-p.exited

		p, afterKill := timedStart()
		for name, want := range map[string]string{"superfluid_session_conversations": fmt.Sprint(convs), "superfluid_session_items": fmt.Sprint(convs * perConv)} {
			if got := crashStoreMetric(b, p.url, name); got != want {
				b.Fatalf("after the kill, %s is %q, want %s", name, got, want)
			}
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			b.Fatal(err)
		}
		if code := p.wait(b, time.Minute); code != 0 {
			b.Fatalf("exit %d after SIGTERM:\n%s", code, p.stderr)
		}
		p, afterStop := timedStart()
		if got := crashStoreMetric(b, p.url, "superfluid_session_items"); got != fmt.Sprint(convs*perConv) {
			b.Fatalf("after the stop, %q items", got)
		}
		b.ReportMetric(float64(empty.Milliseconds()), "ms-start-empty")
		b.ReportMetric(float64(afterKill.Milliseconds()), "ms-start-after-kill")
		b.ReportMetric(float64(afterStop.Milliseconds()), "ms-start-after-stop")
		b.ReportMetric(filled.Seconds(), "s-fill")
	}
}
