package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"superfluid/app"
)

// OpenAI's Conversations API through the official client, and the
// Responses API continuing a conversation, on the tiny synthetic model;
// fork and trim (beyond OpenAI, not in the client) as raw HTTP.

// convTurn asks for one short greedy turn in conversation id.
func convTurn(t *testing.T, client openai.Client, id, text string) *responses.Response {
	t.Helper()
	r, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:           "tiny",
		Conversation:    responses.ResponseNewParamsConversationUnion{OfString: openai.String(id)},
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(text)},
		MaxOutputTokens: openai.Int(6),
		Temperature:     openai.Float(0),
	})
	if err != nil {
		t.Fatalf("turn %q: %v", text, err)
	}
	if r.Conversation.ID != id || len(r.Output) == 0 {
		t.Fatalf("turn %q: %s", text, r.RawJSON())
	}
	return r
}

// convItemIDs lists the conversation's item ids, oldest first.
func convItemIDs(t *testing.T, client openai.Client, id string) []string {
	t.Helper()
	page, err := client.Conversations.Items.List(context.Background(), id, conversations.ItemListParams{Order: conversations.ItemListParamsOrderAsc, Limit: openai.Int(100)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, it := range page.Data {
		ids = append(ids, it.ID)
	}
	return ids
}

// wantAPIError wants err to be an OpenAI error of status naming param
// ("" for any).
func wantAPIError(t *testing.T, what string, err error, status int, param string) {
	t.Helper()
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != status || param != "" && apiErr.Param != param {
		t.Fatalf("%s: %v, want a %d naming %q", what, err, status, param)
	}
}

func TestConversationsThroughOpenAIClient(t *testing.T) {
	st := startStack(t, app.Options{DataDir: t.TempDir()})
	client := openaiClient(st)
	ctx := context.Background()

	c, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
		Items: []responses.ResponseInputItemUnionParam{
			responses.ResponseInputItemParamOfMessage("You answer briefly.", responses.EasyInputMessageRoleDeveloper),
			responses.ResponseInputItemParamOfMessage("Hello there.", responses.EasyInputMessageRoleUser),
		},
		Metadata: shared.Metadata{"topic": "e2e"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Object != "conversation" || c.CreatedAt == 0 {
		t.Fatalf("created %s", c.RawJSON())
	}
	got, err := client.Conversations.Get(ctx, c.ID)
	if err != nil || got.ID != c.ID || got.Metadata.(map[string]any)["topic"] != "e2e" {
		t.Fatalf("get: %v %v", got, err)
	}
	added, err := client.Conversations.Items.New(ctx, c.ID, conversations.ItemNewParams{Items: []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage("Say something.", responses.EasyInputMessageRoleUser)}})
	if err != nil || len(added.Data) != 1 || added.FirstID != added.Data[0].ID || added.Data[0].Type != "message" || added.Data[0].Role != "user" {
		t.Fatalf("add items: %v %v", added, err)
	}

	// Two turns: each appends its input and its output; the second's
	// prompt begins with the first's, which the prefix cache holds.
	first := convTurn(t, client, c.ID, "First question?")
	ids := convItemIDs(t, client, c.ID)
	if len(ids) != 4+len(first.Output) || ids[len(ids)-1] != first.Output[len(first.Output)-1].ID {
		t.Fatalf("items after the first turn %v; output %s", ids, first.RawJSON())
	}
	if n := st.Cache.Pins(); n != 1 {
		t.Errorf("%d pins after a turn, want the conversation's prompt", n)
	}
	second := convTurn(t, client, c.ID, "Second question?")
	cached := second.Usage.InputTokensDetails.CachedTokens
	t.Logf("first turn: %d prompt tokens; second: %d, %d of them cached", first.Usage.InputTokens, second.Usage.InputTokens, cached)
	if cached < first.Usage.InputTokens || 2*cached < second.Usage.InputTokens {
		t.Fatalf("second turn: %d of %d prompt tokens cached, want at least the first turn's %d", cached, second.Usage.InputTokens, first.Usage.InputTokens)
	}
	item, err := client.Conversations.Items.Get(ctx, c.ID, ids[3], conversations.ItemGetParams{})
	if err != nil || item.ID != ids[3] || item.Role != "user" {
		t.Fatalf("item %s: %v %v", ids[3], item, err)
	}

	// Fork at the first turn's last item: the fork holds the items up to
	// it, and a turn there is warm too.
	var fork struct{ ID, Object string }
	postJSON(t, st.URL()+"/v1/conversations/"+c.ID+"/fork", map[string]any{"item_id": ids[len(ids)-1], "metadata": map[string]string{"fork": "1"}}, &fork)
	if fork.Object != "conversation" || fork.ID == c.ID {
		t.Fatalf("fork %+v", fork)
	}
	if fids := convItemIDs(t, client, fork.ID); len(fids) != len(ids) || fids[len(fids)-1] != ids[len(ids)-1] {
		t.Fatalf("fork items %v, want %v", fids, ids)
	}
	other := convTurn(t, client, fork.ID, "A different question?")
	if other.Usage.InputTokensDetails.CachedTokens < first.Usage.InputTokens {
		t.Errorf("a turn in the fork: %d cached, want at least %d", other.Usage.InputTokensDetails.CachedTokens, first.Usage.InputTokens)
	}

	// A streamed turn in the fork appends its output once the stream has
	// completed; a turn refused (past the context) appends nothing and
	// leaves the conversation free for the next.
	before := convItemIDs(t, client, fork.ID)
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "tiny", MaxOutputTokens: openai.Int(6), Temperature: openai.Float(0),
		Conversation: responses.ResponseNewParamsConversationUnion{OfConversationObject: &responses.ResponseConversationParam{ID: fork.ID}},
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Stream it?")}})
	var streamed *responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" || ev.Type == "response.incomplete" {
			r := ev.Response
			streamed = &r
		}
	}
	if err := stream.Err(); err != nil || streamed == nil || streamed.Conversation.ID != fork.ID {
		t.Fatalf("streamed turn: %v %v", streamed, err)
	}
	stream.Close()
	after := convItemIDs(t, client, fork.ID)
	if len(after) != len(before)+1+len(streamed.Output) || after[len(after)-1] != streamed.Output[len(streamed.Output)-1].ID {
		t.Fatalf("after the streamed turn %v (before %v)", after, before)
	}
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "tiny", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(longPrompt)},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(fork.ID)}})
	wantAPIError(t, "a turn past the context", err, http.StatusBadRequest, "")
	if now := convItemIDs(t, client, fork.ID); len(now) != len(after) {
		t.Fatalf("a refused turn changed the conversation: %d items, were %d", len(now), len(after))
	}
	convTurn(t, client, fork.ID, "Still free?")

	// Trim the original: drop its first item, then everything after the
	// first turn's input.
	all := convItemIDs(t, client, c.ID)
	var trimmed struct{ ID string }
	postJSON(t, st.URL()+"/v1/conversations/"+c.ID+"/trim", map[string]any{"drop_first": 1}, &trimmed)
	postJSON(t, st.URL()+"/v1/conversations/"+c.ID+"/trim", map[string]any{"after": all[3]}, &trimmed)
	if now := convItemIDs(t, client, c.ID); trimmed.ID != c.ID || len(now) != 3 || now[0] != all[1] || now[2] != all[3] {
		t.Fatalf("after the trims %v (from %v)", now, all)
	}

	// Delete an item, then the conversation; the fork keeps the items.
	if cv, err := client.Conversations.Items.Delete(ctx, c.ID, all[1]); err != nil || cv.ID != c.ID {
		t.Fatalf("delete item: %v %v", cv, err)
	}
	del, err := client.Conversations.Delete(ctx, c.ID)
	if err != nil || !del.Deleted || del.ID != c.ID || del.Object != "conversation.deleted" {
		t.Fatalf("delete: %v %v", del, err)
	}
	_, err = client.Conversations.Get(ctx, c.ID)
	wantAPIError(t, "get a deleted conversation", err, http.StatusNotFound, "")
	if fids := convItemIDs(t, client, fork.ID); len(fids) < len(ids)+6 {
		t.Fatalf("the fork after its origin was deleted: %v", fids)
	}

	// Refusals: unknown ids 404, bad items 400 naming the parameter.
	_, err = client.Conversations.Items.List(ctx, "conv_nope", conversations.ItemListParams{})
	wantAPIError(t, "list an unknown conversation", err, http.StatusNotFound, "")
	_, err = client.Conversations.Items.Get(ctx, fork.ID, "msg_nope", conversations.ItemGetParams{})
	wantAPIError(t, "get an unknown item", err, http.StatusNotFound, "")
	_, err = client.Conversations.New(ctx, conversations.ConversationNewParams{Items: []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfFunctionCallOutput("no call id")}})
	wantAPIError(t, "an output without its call", err, http.StatusBadRequest, "items")
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "tiny", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String(fork.ID)}, PreviousResponseID: openai.String(first.ID)})
	wantAPIError(t, "conversation with previous_response_id", err, http.StatusBadRequest, "conversation")
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{Model: "tiny", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("x")},
		Conversation: responses.ResponseNewParamsConversationUnion{OfString: openai.String("conv_nope")}})
	wantAPIError(t, "an unknown conversation", err, http.StatusNotFound, "conversation")
	status, body := post(t, st.URL()+"/v1/conversations/"+fork.ID+"/trim", map[string]any{"drop_first": -1})
	if status != http.StatusBadRequest || !json.Valid(body) {
		t.Fatalf("trim drop_first -1: %d %s", status, body)
	}
}

// After a restart (the data and park directories kept), a conversation's
// next turn finds its prompt parked: only the new turn is evaluated.
func TestConversationWarmAfterRestart(t *testing.T) {
	data, park := t.TempDir(), t.TempDir()
	a := startParkStack(t, app.Options{DataDir: data, ParkDir: park})
	client := openaiClient(a.Stack)
	c, err := client.Conversations.New(context.Background(), conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	// Longer than the shortest stream the cache parks (64 tokens).
	first := convTurn(t, client, c.ID, strings.Repeat("Tell me about the sea, in a few words, please. ", 8))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := startParkStack(t, app.Options{DataDir: data, ParkDir: park})
	second := convTurn(t, openaiClient(b.Stack), c.ID, "And the mountains?")
	cached := second.Usage.InputTokensDetails.CachedTokens
	t.Logf("after the restart: %d of %d prompt tokens cached (the first turn's prompt: %d)", cached, second.Usage.InputTokens, first.Usage.InputTokens)
	if cached < first.Usage.InputTokens {
		t.Fatalf("after the restart %d of %d prompt tokens cached, want at least the first turn's %d", cached, second.Usage.InputTokens, first.Usage.InputTokens)
	}
}

// An Anthropic cache_control pin is recorded in the session store and
// pinned again when the server restarts on the same data directory.
func TestAnthropicPinOutlivesRestart(t *testing.T) {
	data := t.TempDir()
	a := startParkStack(t, app.Options{DataDir: data})
	body := map[string]any{"model": "tiny", "max_tokens": 2, "temperature": 0,
		"system":   []any{map[string]any{"type": "text", "text": strings.Repeat("You are a careful agent. ", 10), "cache_control": map[string]any{"type": "ephemeral", "ttl": "1h"}}},
		"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
	if status, raw := post(t, a.URL()+"/v1/messages", body); status != http.StatusOK {
		t.Fatalf("messages: %d %s", status, raw)
	}
	if n := a.Cache.Pins(); n != 1 {
		t.Fatalf("%d pins before the restart, want the system prompt's", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := startParkStack(t, app.Options{DataDir: data})
	if n := b.Cache.Pins(); n != 1 {
		t.Fatalf("%d pins after the restart, want the recorded one", n)
	}
	// Without the data directory nothing is recorded, nothing restored.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	c := startParkStack(t, app.Options{})
	if n := c.Cache.Pins(); n != 0 {
		t.Fatalf("%d pins on a server without the data directory", n)
	}
}

// --max-conversations-bytes: a write past the bound is a 413 in OpenAI's
// shape, what was written stays readable, and a deleted conversation
// makes room again.
func TestConversationsQuota(t *testing.T) {
	st := startStack(t, app.Options{DataDir: t.TempDir(), Disk: app.DiskQuotas{ConversationsBytes: 16 << 10}})
	item := map[string]any{"role": "user", "content": strings.Repeat("x", 1000)}
	var made []string
	for i := 0; ; i++ {
		status, body := post(t, st.URL()+"/v1/conversations", map[string]any{"items": []any{item, item}})
		if status == http.StatusRequestEntityTooLarge {
			expectError(t, "openai", status, http.StatusRequestEntityTooLarge, body, nil)
			break
		}
		if status != http.StatusOK || i > 100 {
			t.Fatalf("conversation %d: %d %s", i, status, body)
		}
		var c struct{ ID string }
		json.Unmarshal(body, &c)
		made = append(made, c.ID)
	}
	if len(made) == 0 {
		t.Fatal("not one conversation fit")
	}
	client := openaiClient(st)
	if ids := convItemIDs(t, client, made[0]); len(ids) != 2 {
		t.Fatalf("the first conversation after the quota: %v", ids)
	}
	if _, err := client.Conversations.Delete(context.Background(), made[0]); err != nil {
		t.Fatal(err)
	}
	if status, body := post(t, st.URL()+"/v1/conversations", map[string]any{"items": []any{item}}); status != http.StatusOK {
		t.Fatalf("after a delete: %d %s", status, body)
	}
}

// A model loaded on demand gets its recorded pins back when it loads
// after a restart, not only the resident model at start-up.
func TestPinsRestoredOnDemand(t *testing.T) {
	data, models := t.TempDir(), t.TempDir()
	seededModel(t, models, "beta", 22)
	o := modelsOptions(tinyModel(t), "tiny")
	o.DataDir, o.ModelsDir = data, models
	ask := func(st *parkStack, pin bool) {
		t.Helper()
		system := map[string]any{"type": "text", "text": strings.Repeat("You are a careful agent. ", 10)}
		if pin {
			system["cache_control"] = map[string]any{"type": "ephemeral", "ttl": "1h"}
		}
		body := map[string]any{"model": "beta", "max_tokens": 2, "temperature": 0, "system": []any{system},
			"messages": []any{map[string]any{"role": "user", "content": "hi"}}}
		if status, raw := post(t, st.URL()+"/v1/messages", body); status != http.StatusOK {
			t.Fatalf("messages: %d %s", status, raw)
		}
	}
	betaPins := func(st *parkStack) int {
		t.Helper()
		for _, lm := range st.Models.Loaded() {
			if lm.Model.Name == "beta" {
				return lm.Model.Cache.(interface{ Pins() int }).Pins()
			}
		}
		t.Fatal("beta is not loaded")
		return 0
	}
	a := startParkStack(t, o)
	ask(a, true)
	if n := betaPins(a); n != 1 {
		t.Fatalf("%d pins in beta's cache, want the system prompt's", n)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := startParkStack(t, o)
	ask(b, false)
	if n := betaPins(b); n != 1 {
		t.Fatalf("%d pins in beta's cache after the restart, want the recorded one", n)
	}
}
