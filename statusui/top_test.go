package statusui

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"

	"superfluid/status"
)

func TestTopModel(t *testing.T) {
	var m tea.Model = topModel{width: 80, height: 24}
	m, _ = m.Update(tea.WindowSizeMsg{Width: 100, Height: 30})
	m, _ = m.Update(statusMsg{sample()})
	if got := ansi.Strip(m.View().Content); !strings.Contains(got, "qwen:0.5b") || len(strings.Split(got, "\n")) > 30 {
		t.Fatal(got)
	}
	m, _ = m.Update(connMsg{"reconnecting: gone"})
	if got := ansi.Strip(m.View().Content); !strings.Contains(got, "reconnecting: gone") || !strings.Contains(got, "qwen:0.5b") {
		t.Fatalf("the last status stays on screen while reconnecting:\n%s", got)
	}
	for _, key := range []tea.KeyPressMsg{{Code: 'q', Text: "q"}, {Code: 'c', Mod: tea.ModCtrl}} {
		if _, cmd := m.Update(key); cmd == nil {
			t.Fatalf("%v does not quit", key)
		} else if _, ok := cmd().(tea.QuitMsg); !ok {
			t.Fatalf("%v: %T", key, cmd())
		}
	}
	if _, cmd := m.Update(tea.KeyPressMsg{Code: 'x', Text: "x"}); cmd != nil {
		t.Fatal("x quits")
	}
}

// follow reports a refused stream and tries again; a live one's statuses
// reach the view.
func TestFollowReconnects(t *testing.T) {
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":{"message":"the server is shutting down"}}`)
			return
		}
		fmt.Fprint(w, "event: status\ndata: {\"version\":\"v2\"}\n\n")
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var msgs []tea.Msg
	follow(ctx, &status.Client{URL: srv.URL}, func(msg tea.Msg) {
		msgs = append(msgs, msg)
		if s, ok := msg.(statusMsg); ok && s.st.Version == "v2" {
			cancel()
		}
	})
	if len(msgs) != 3 || fmt.Sprint(msgs[0]) != "{reconnecting: the server answered 503: the server is shutting down}" || msgs[1] != (connMsg{}) {
		t.Fatalf("got %v", msgs)
	}
	if s, ok := msgs[2].(statusMsg); !ok || s.st.Version != "v2" {
		t.Fatalf("got %v", msgs[2])
	}
}
