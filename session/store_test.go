package session

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCreateAppendSurviveReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	c, created, err := s.Create(map[string]string{"topic": "demo"}, msgs("first", 2))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.ID, "conv_") || c.Len != 2 || c.Metadata["topic"] != "demo" {
		t.Fatalf("created %+v", c)
	}
	for _, it := range created {
		if !strings.HasPrefix(it.ID, "msg_") || it.CreatedAt == 0 {
			t.Fatalf("item not filled in: %+v", it)
		}
	}
	more, err := s.Append(c.ID, []Item{msg("second"), {Type: "function_call", Data: []byte(`{"name":"f"}`)}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(more[1].ID, "fc_") {
		t.Fatalf("function call id %s", more[1].ID)
	}
	want := mustAll(t, s, c.ID)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{})
	defer s.Close()
	got := mustAll(t, s, c.ID)
	if !slices.EqualFunc(got, want, func(a, b Item) bool {
		return a.ID == b.ID && a.Type == b.Type && string(a.Data) == string(b.Data) && a.CreatedAt == b.CreatedAt
	}) {
		t.Fatalf("after reopen:\n%v\nwant\n%v", got, want)
	}
	if h, _ := s.Get(c.ID); h.Len != 4 || h.Metadata["topic"] != "demo" {
		t.Fatalf("header after reopen %+v", h)
	}
}

func TestPagingAscendingAndDescending(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	defer s.Close()
	c, items, err := s.Create(nil, msgs("m", 5))
	if err != nil {
		t.Fatal(err)
	}
	all := ids(items)
	page, more, err := s.Items(c.ID, "", 2, false)
	if err != nil || !slices.Equal(ids(page), all[:2]) || !more {
		t.Fatalf("first page %v %v %v", ids(page), more, err)
	}
	page, more, _ = s.Items(c.ID, all[1], 2, false)
	if !slices.Equal(ids(page), all[2:4]) || !more {
		t.Fatalf("second page %v %v", ids(page), more)
	}
	page, more, _ = s.Items(c.ID, all[3], 2, false)
	if !slices.Equal(ids(page), all[4:]) || more {
		t.Fatalf("last page %v %v", ids(page), more)
	}
	page, more, _ = s.Items(c.ID, "", 3, true)
	if !slices.Equal(ids(page), []string{all[4], all[3], all[2]}) || !more {
		t.Fatalf("newest first %v %v", ids(page), more)
	}
	page, more, _ = s.Items(c.ID, all[2], 3, true)
	if !slices.Equal(ids(page), []string{all[1], all[0]}) || more {
		t.Fatalf("older page %v %v", ids(page), more)
	}
	for _, limit := range []int{0, -1, MaxPage + 1} {
		if _, _, err := s.Items(c.ID, "", limit, false); !errors.Is(err, ErrInvalid) {
			t.Fatalf("limit %d: %v", limit, err)
		}
	}
	if _, _, err := s.Items(c.ID, "msg_nope", 2, false); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown cursor: %v", err)
	}
}

func TestForkSharesItemsAndTrimsAreLocal(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	c, items, _ := s.Create(nil, msgs("base", 4))
	f, err := s.Fork(c.ID, items[1].ID, map[string]string{"branch": "b"})
	if err != nil {
		t.Fatal(err)
	}
	if f.Len != 2 || f.ID == c.ID || f.Metadata["branch"] != "b" {
		t.Fatalf("fork %+v", f)
	}
	whole, _ := s.Fork(c.ID, "", nil)
	if whole.Len != 4 {
		t.Fatalf("fork of everything holds %d", whole.Len)
	}
	if n := s.Stats().Items; n != 4 {
		t.Fatalf("forks copied items: %d stored", n)
	}
	if _, err := s.Append(f.ID, msgs("branch", 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.TrimFront(c.ID, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.TrimAfter(whole.ID, items[2].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteItem(f.ID, items[0].ID); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		if got := ids(mustAll(t, s, c.ID)); !slices.Equal(got, ids(items[1:])) {
			t.Fatalf("source after trim-front %v", got)
		}
		if got := ids(mustAll(t, s, whole.ID)); !slices.Equal(got, ids(items[:3])) {
			t.Fatalf("whole fork after trim-after %v", got)
		}
		got := mustAll(t, s, f.ID)
		if len(got) != 2 || got[0].ID != items[1].ID {
			t.Fatalf("fork after delete-item %v", ids(got))
		}
		if _, err := s.Item(f.ID, items[0].ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted item still there: %v", err)
		}
		if it, err := s.Item(whole.ID, items[0].ID); err != nil || string(it.Data) != string(items[0].Data) {
			t.Fatalf("a fork's shared item went with another's delete: %v", err)
		}
	}
	check(s)
	s.Close()
	s = open(t, dir, Options{})
	defer s.Close()
	check(s)
}

func TestDeleteFreesOnlyUnsharedItems(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	defer s.Close()
	c, _, _ := s.Create(nil, msgs("x", 3))
	f, _ := s.Fork(c.ID, "", nil)
	s.Append(c.ID, msgs("own", 2))
	if err := s.Delete(c.ID); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Items != 3 || st.Conversations != 1 {
		t.Fatalf("after delete %+v", st)
	}
	if _, err := s.Get(c.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted conversation: %v", err)
	}
	if err := s.Delete(c.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if got := mustAll(t, s, f.ID); len(got) != 3 {
		t.Fatalf("fork lost items: %d", len(got))
	}
}

func TestHostileInputIsRefusedBeforeLookup(t *testing.T) {
	s := open(t, t.TempDir(), Options{MaxItemBytes: 1024})
	defer s.Close()
	c, _, _ := s.Create(nil, msgs("x", 1))
	bad := []string{"", "../../etc/passwd", "conv_\x00", strings.Repeat("a", MaxIDLen+1), "a b", "ü"}
	for _, id := range bad {
		if _, err := s.Get(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Get(%q): %v", id, err)
		}
		if _, err := s.Item(c.ID, id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Item(%q): %v", id, err)
		}
		if id != "" {
			if _, err := s.Fork(c.ID, id, nil); !errors.Is(err, ErrInvalid) {
				t.Errorf("Fork at %q: %v", id, err)
			}
		}
	}
	items := [][]Item{
		{{Type: "message", Data: []byte(`{"unterminated`)}},
		{{Type: "message"}},
		{{Type: "", Data: []byte(`{}`)}},
		{{Type: "mess age", Data: []byte(`{}`)}},
		{{Type: "message", ID: "../x", Data: []byte(`{}`)}},
		{{Type: "message", Data: []byte(`"` + strings.Repeat("a", 2000) + `"`)}},
		{{Type: "message", ID: "msg_1", Data: []byte(`{}`)}, {Type: "message", ID: "msg_1", Data: []byte(`{}`)}},
	}
	for i, it := range items {
		if _, err := s.Append(c.ID, it); !errors.Is(err, ErrInvalid) {
			t.Errorf("items %d: %v", i, err)
		}
	}
	stored := mustAll(t, s, c.ID)
	if _, err := s.Append(c.ID, []Item{{Type: "message", ID: stored[0].ID, Data: []byte(`{}`)}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("an id already stored: %v", err)
	}
	metas := []map[string]string{
		{"": "v"},
		{strings.Repeat("k", MaxMetadataKeyLen+1): "v"},
		{"k": strings.Repeat("v", MaxMetadataValueLen+1)},
		{"k": "\xff"},
	}
	many := map[string]string{}
	for i := 0; i <= MaxMetadataPairs; i++ {
		many[strings.Repeat("k", i+1)] = "v"
	}
	metas = append(metas, many)
	for i, m := range metas {
		if _, err := s.SetMetadata(c.ID, m); !errors.Is(err, ErrInvalid) {
			t.Errorf("metadata %d: %v", i, err)
		}
	}
	// The most OpenAI allows is fine, counted in characters.
	ok := map[string]string{strings.Repeat("é", MaxMetadataKeyLen): strings.Repeat("ü", MaxMetadataValueLen)}
	if _, err := s.SetMetadata(c.ID, ok); err != nil {
		t.Errorf("metadata at the bounds: %v", err)
	}
	if got := mustAll(t, s, c.ID); len(got) != 1 {
		t.Fatalf("a refused append left %d items", len(got))
	}
}

func TestQuotas(t *testing.T) {
	s := open(t, t.TempDir(), Options{MaxConversations: 2, MaxItemsPerConversation: 3, MaxBytes: 4096})
	defer s.Close()
	c, _, err := s.Create(nil, msgs("x", 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(c.ID, msgs("y", 1)); !errors.Is(err, ErrQuota) {
		t.Fatalf("past the item bound: %v", err)
	}
	if _, _, err := s.Create(nil, msgs("x", 4)); !errors.Is(err, ErrQuota) {
		t.Fatalf("created past the item bound: %v", err)
	}
	if _, err := s.Fork(c.ID, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(nil, nil); !errors.Is(err, ErrQuota) {
		t.Fatalf("past the conversation bound: %v", err)
	}
	if _, err := s.Fork(c.ID, "", nil); !errors.Is(err, ErrQuota) {
		t.Fatalf("forked past the conversation bound: %v", err)
	}
	if err := s.TrimFront(c.ID, 3); err != nil {
		t.Fatal(err)
	}
	big := Item{Type: "message", Data: []byte(`"` + strings.Repeat("a", 3000) + `"`)}
	if _, err := s.Append(c.ID, []Item{big}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(c.ID, []Item{big}); !errors.Is(err, ErrQuota) {
		t.Fatalf("past MaxBytes: %v", err)
	}
}

// An item's Data reads back byte for byte after a restart: compacted when
// stored, never HTML-escaped, whatever bytes its strings hold.
func TestItemDataIsTheSameBytesAfterARestart(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	data := []string{`{ "a" : "<b>&</b>" ,
	"u": "\u2028 é ` + "\xff" + `" }`, `[1, 2.50, "x"]`, `"just a string"`, `null`}
	var in []Item
	for _, d := range data {
		in = append(in, Item{Type: "message", Data: []byte(d)})
	}
	c, stored, err := s.Create(nil, in)
	if err != nil {
		t.Fatal(err)
	}
	if string(stored[0].Data) != `{"a":"<b>&</b>","u":"\u2028 é `+"\xff"+`"}` {
		t.Fatalf("stored as %q", stored[0].Data)
	}
	s.Close()
	s = open(t, dir, Options{})
	defer s.Close()
	for i, it := range mustAll(t, s, c.ID) {
		if string(it.Data) != string(stored[i].Data) {
			t.Fatalf("item %d read back as %q, stored as %q", i, it.Data, stored[i].Data)
		}
	}
}

func TestOneWriteIsBoundedBeforeItIsCopied(t *testing.T) {
	s := open(t, t.TempDir(), Options{})
	defer s.Close()
	c, _, _ := s.Create(nil, nil)
	big := []byte(`"` + strings.Repeat("a", DefaultMaxItemBytes-2) + `"`)
	items := make([]Item, maxRecordBytes/2/DefaultMaxItemBytes+1)
	for i := range items {
		items[i] = Item{Type: "message", Data: big}
	}
	if _, err := s.Append(c.ID, items); !errors.Is(err, ErrQuota) {
		t.Fatalf("%d MiB in one append: %v", len(items), err)
	}
}

// An item echoed back with its stored id and content is shared, not
// stored twice; with other content, or into a conversation that holds it,
// it is refused.
func TestAnEchoedItemIsShared(t *testing.T) {
	dir := t.TempDir()
	clk := newClock()
	s := open(t, dir, Options{Now: clk.now})
	a, items, _ := s.Create(nil, msgs("answer", 1))
	clk.t = clk.t.Add(time.Minute)
	echo := Item{ID: items[0].ID, Type: "message", Data: []byte(" " + string(items[0].Data) + "\n")}
	b, got, err := s.Create(nil, []Item{echo, msg("next question")})
	if err != nil {
		t.Fatal(err)
	}
	if got[0].CreatedAt != items[0].CreatedAt || s.Stats().Items != 2 {
		t.Fatalf("the echo was stored again: %+v, %d items", got[0], s.Stats().Items)
	}
	if _, err := s.Append(a.ID, []Item{echo}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("into the conversation that holds it: %v", err)
	}
	other := echo
	other.Data = []byte(`{"changed":true}`)
	if _, err := s.Append(b.ID, []Item{other}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("the stored id with other content: %v", err)
	}
	if err := s.Delete(a.ID); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir, Options{Now: clk.now})
	defer s.Close()
	if all := mustAll(t, s, b.ID); len(all) != 2 || all[0].ID != items[0].ID || string(all[0].Data) != string(items[0].Data) {
		t.Fatalf("after the source's delete and a restart: %v", all)
	}
}
