package responses

import (
	"encoding/json"
	"testing"

	"superfluid/http/wire"
	"superfluid/session"
)

func convAPI(t *testing.T) (*api, *session.Store) {
	t.Helper()
	ss, err := session.Open(t.TempDir(), session.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	st := &Store{}
	st.SetSessions(ss)
	return &api{store: st}, ss
}

// A turn in a conversation reads its items before the input, and the
// finished turn — input, then output — is appended in the shape the
// conversation lists it in; reading the conversation back gives the same
// messages (so the next turn's prompt begins with this one's).
func TestConversationTurnReadsAndAppends(t *testing.T) {
	a, ss := convAPI(t)
	first, err := NewItems(rawItems(t, `[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]`), "items")
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := ss.Create(nil, SessionItems(first))
	if err != nil {
		t.Fatal(err)
	}
	req := respRequest{Text: &respTextConfig{}, Input: json.RawMessage(`"how are you?"`), Conversation: json.RawMessage(`{"id": "` + c.ID + `"}`)}
	rt, err := a.respTurn(&req)
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.turn.Messages) != 3 || rt.turn.Messages[0].Content != "hi" || rt.turn.Messages[1].Content != "hello" || rt.turn.Messages[2].Content != "how are you?" || rt.convLen != 2 {
		t.Fatalf("messages %+v", rt.turn.Messages)
	}
	job := &respJob{conv: rt.conv, convInput: rt.convInput, obj: respObject{Output: []respItemOut{
		{ID: "msg_out1", Type: "message", Status: "completed", Content: []respPartOut{outputText("fine")}}}}}
	if err := a.appendTurn(job); err != nil {
		t.Fatal(err)
	}
	all, err := ss.All(c.ID)
	if err != nil || len(all) != 4 || all[3].ID != "msg_out1" || all[2].Type != "message" {
		t.Fatalf("after the turn: %+v %v", all, err)
	}
	req2 := respRequest{Text: &respTextConfig{}, Input: json.RawMessage(`"and now?"`), Conversation: json.RawMessage(`"` + c.ID + `"`)}
	rt2, err := a.respTurn(&req2)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(rt2.turn.Messages[:3])
	want, _ := json.Marshal(rt.turn.Messages)
	if string(got) != string(want) || rt2.turn.Messages[3].Content != "fine" {
		t.Fatalf("the second turn does not begin with the first:\n got %s\nwant %s", got, want)
	}
}

func TestConversationRefusals(t *testing.T) {
	a, ss := convAPI(t)
	c, _, err := ss.Create(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		req    respRequest
		status int
		param  string
	}{
		{respRequest{Text: &respTextConfig{}, Input: json.RawMessage(`"x"`), Conversation: json.RawMessage(`"` + c.ID + `"`), PreviousResponseID: "resp_1"}, 400, "conversation"},
		{respRequest{Text: &respTextConfig{}, Input: json.RawMessage(`"x"`), Conversation: json.RawMessage(`"conv_nope"`)}, 404, "conversation"},
		{respRequest{Text: &respTextConfig{}, Input: json.RawMessage(`"x"`), Conversation: json.RawMessage(`"resp_1"`)}, 400, "conversation"},
		{respRequest{Text: &respTextConfig{}, Input: json.RawMessage(`"x"`), Conversation: json.RawMessage(`7`)}, 400, "conversation"},
		{respRequest{Text: &respTextConfig{}, Input: json.RawMessage(`[{"role": "robot", "content": "x"}]`), Conversation: json.RawMessage(`"` + c.ID + `"`)}, 400, "input"},
	} {
		_, err := a.respTurn(&tc.req)
		e := wire.AsError(err)
		if err == nil || e.Status != tc.status || e.Param != tc.param {
			t.Errorf("%s: %v (%+v), want %d naming %q", tc.req.Conversation, err, e, tc.status, tc.param)
		}
	}
	if all, _ := ss.All(c.ID); len(all) != 0 {
		t.Fatalf("a refused turn appended %d items", len(all))
	}
}

// A conversation runs one turn at a time: a second is refused with a 409
// until the first releases it.
func TestConversationOneTurnAtATime(t *testing.T) {
	a, _ := convAPI(t)
	release, err := a.claimConversation(json.RawMessage(`"conv_a"`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.claimConversation(json.RawMessage(`{"id": "conv_a"}`)); wire.AsError(err).Status != 409 || wire.AsError(err).Param != "conversation" {
		t.Fatalf("a second turn: %v", err)
	}
	other, err := a.claimConversation(json.RawMessage(`"conv_b"`))
	if err != nil {
		t.Fatalf("another conversation: %v", err)
	}
	other()
	release()
	release() // twice is harmless
	again, err := a.claimConversation(json.RawMessage(`"conv_a"`))
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	again()
	if none, err := a.claimConversation(nil); err != nil {
		t.Fatal(err)
	} else {
		none()
	}
}

// An item a conversation accepts must render in every later turn, or the
// conversation could never be continued: whatever NewItems keeps,
// respConversation reads, as the same messages as the item it was sent as.
func FuzzNewItemsRenderLater(f *testing.F) {
	f.Add(`{"role": "user", "content": "hi"}`)
	f.Add(`{"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}, {"type": "output_text", "text": "x"}]}`)
	f.Add(`{"type": "message", "role": "developer", "content": null}`)
	f.Add(`{"type": "function_call", "call_id": "c", "name": "f", "arguments": {"a": [1]}}`)
	f.Add(`{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_text", "text": "x"}]}`)
	f.Add(`{"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}], "content": [{"type": "reasoning_text", "text": "r"}]}`)
	f.Add(`{"type": "reasoning", "content": "not a list"}`)
	f.Add(`{"role": "user", "content": [{"type": "input_text", "text": "see"}, {"type": "input_image", "image_url": "data:image/png;base64,aGk=", "detail": "low"}]}`)
	f.Add(`{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}, {"type": "input_image", "image_url": "https://h/x.png"}]}`)
	images := func() *respImages {
		return &respImages{file: func(id string) ([]byte, error) { return []byte(id), nil }}
	}
	f.Fuzz(func(t *testing.T, item string) {
		user := json.RawMessage(`{"role": "user", "content": "next"}`)
		kept, err := NewItems([]json.RawMessage{json.RawMessage(item)}, "items")
		if err != nil {
			if e := wire.AsError(err); e.Status != 400 || e.Param != "items" {
				t.Fatalf("%s: %d naming %q", item, e.Status, e.Param)
			}
			return
		}
		got, err := respConversation([]json.RawMessage{kept[0].Data, user}, index, images())
		if err != nil {
			t.Fatalf("%s kept as %s does not render: %v", item, kept[0].Data, err)
		}
		sent, err := respConversation([]json.RawMessage{json.RawMessage(item), user}, index, images())
		if err != nil {
			return // the item alone renders nothing the turn takes (an empty reasoning)
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(sent)
		if string(a) != string(b) {
			t.Fatalf("%s renders as\n%s\nkept as %s it renders as\n%s", item, b, kept[0].Data, a)
		}
	})
}
