package responses

import (
	"encoding/json"
	"fmt"
	"testing"

	"superfluid/session"
)

// chainTurn runs the reading and storing of one response without a
// model: the request's turn is read, the output is one message, and the
// response is kept as a finished one is.
func chainTurn(t *testing.T, a *api, prev, input, answer string) (string, respTurnOf) {
	t.Helper()
	req := respRequest{Text: &respTextConfig{}, Input: json.RawMessage(fmt.Sprintf("%q", input)), PreviousResponseID: prev}
	rt, err := a.respTurn(&req)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("resp_%d", len(rt.items))
	job := &respJob{input: rt.items, store: true, prevChain: rt.prevChain, ownInput: rt.items[rt.prevLen:],
		obj: respObject{ID: id, Output: []respItemOut{{ID: "msg_" + id, Type: "message", Status: "completed", Content: []respPartOut{outputText(answer)}}}}}
	a.keepResponse(job)
	return id, rt
}

// With a chain store, each stored response keeps its items as a fork of
// the previous response's chain: its record holds none, and a response
// chained to it reads the whole conversation, in order. Deleting a
// response deletes its chain, not the chains forked from it.
func TestChainsHoldTheItemsOnce(t *testing.T) {
	cs, err := session.Open(t.TempDir(), session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	st := &Store{}
	st.SetChains(cs)
	a := &api{store: st}
	id1, _ := chainTurn(t, a, "", "one", "first answer")
	id2, _ := chainTurn(t, a, id1, "two", "second answer")
	id3, rt := chainTurn(t, a, id2, "three", "third answer")
	var texts []string
	for _, m := range rt.turn.Messages {
		texts = append(texts, m.Role+":"+m.Content)
	}
	if got := fmt.Sprint(texts); got != "[user:one assistant:first answer user:two assistant:second answer user:three]" {
		t.Fatalf("the third turn reads %s", got)
	}
	for _, id := range []string{id1, id2, id3} {
		rec, err := st.get().Get(id)
		if err != nil || rec.Chain == "" || len(rec.Input) != 0 {
			t.Fatalf("record %s: chain %q, input %s, %v", id, rec.Chain, rec.Input, err)
		}
	}
	rec2, _ := st.get().Get(id2)
	if st.get().Delete(id2) != nil {
		t.Fatal("delete")
	}
	st.dropChain(rec2.Chain)
	if _, err := cs.Get(rec2.Chain); err == nil {
		t.Fatal("the deleted response's chain is still there")
	}
	_, rt4 := chainTurn(t, a, id3, "four", "fourth")
	if len(rt4.turn.Messages) != 7 {
		t.Fatalf("after deleting the middle response, the last chain reads %d messages", len(rt4.turn.Messages))
	}
}

// Without a chain store a record holds its whole conversation, and a
// chain store added later continues from it.
func TestChainsContinueAWholeRecord(t *testing.T) {
	st := &Store{}
	a := &api{store: st}
	id1, _ := chainTurn(t, a, "", "one", "first answer")
	rec, err := st.get().Get(id1)
	if err != nil || rec.Chain != "" || len(rec.Input) == 0 {
		t.Fatalf("without chains: %+v %v", rec, err)
	}
	cs, err := session.Open(t.TempDir(), session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	st.SetChains(cs)
	id2, _ := chainTurn(t, a, id1, "two", "second answer")
	_, rt := chainTurn(t, a, id2, "three", "third")
	if len(rt.turn.Messages) != 5 || rt.turn.Messages[1].Content != "first answer" {
		t.Fatalf("messages %+v", rt.turn.Messages)
	}
	if rec, _ := st.get().Get(id2); rec.Chain == "" {
		t.Fatal("the second response has no chain")
	}
}
