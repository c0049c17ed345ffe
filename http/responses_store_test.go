package http

import (
	"strings"
	"testing"

	"superfluid/chat"
	"superfluid/http/wire"
	"superfluid/respstore"
	"superfluid/task/tasktest"
)

// The Responses API through the server: its store, set as the app sets it.

// A request whose conversation alone is over what a stored response may
// hold is refused before it runs, naming store, unless it asks not to be
// stored.
func TestRespStoreRefusesAConversationTooLargeToStore(t *testing.T) {
	m := fakeModel(t, true)
	tmpl, err := chat.Parse(chat.ChatML, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sc := &tasktest.StubSched{}
	m.Chat, m.Sched = tmpl, sc
	s, err := NewServer(Config{})
	if err != nil {
		t.Fatal(err)
	}
	s.SetModel(m)
	st, err := respstore.Open(t.TempDir(), respstore.Options{MaxRecordBytes: 200})
	if err != nil {
		t.Fatal(err)
	}
	s.SetResponses(st)
	c := memServer(t, s)
	long := strings.Repeat("y", 300)
	status, _, b := call(t, c, "POST", "/v1/responses", `{"model":"fake","input":"`+long+`"}`)
	if msg := errorShapeOf(t, wire.OpenAI, status, b); status != 400 || !strings.Contains(msg, "store") || !strings.Contains(msg, "200 bytes") {
		t.Fatalf("a conversation over the record bound: %d %s", status, b)
	}
	if len(sc.Taken()) != 0 {
		t.Fatal("the refused request reached the scheduler")
	}
	call(t, c, "POST", "/v1/responses", `{"model":"fake","store":false,"input":"`+long+`"}`)
	if len(sc.Taken()) != 1 {
		t.Fatal("store: false was not served")
	}
}
