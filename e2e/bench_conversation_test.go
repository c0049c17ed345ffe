package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"superfluid/app"
)

// BenchmarkConversationRestart is issue 26's third measure: a 50-turn
// conversation (about 10,000 tokens) through the Responses API's
// conversation parameter, the server restarted before the last turn (its
// data and park directories kept). It reports the prompt tokens the last
// turn evaluated against the tokens that turn added, and against the same
// prompt sent whole to a server with nothing cached; and the disk each
// turn added (the session store and the stored responses) at turns 1, 10
// and 50, which stays flat: a turn's items are written once.
//
//	go test ./e2e/ -run '^$' -bench BenchmarkConversationRestart -benchtime 1x
func BenchmarkConversationRestart(b *testing.B) {
	const turns = 50
	for range b.N {
		data, park := b.TempDir(), b.TempDir()
		o := app.Options{ModelPath: tinyModel(b), DataDir: data, ParkDir: park, Ctx: 16384}
		st := startParkStack(b, o)
		client := openaiClient(st.Stack)
		c, err := client.Conversations.New(context.Background(), conversations.ConversationNewParams{})
		if err != nil {
			b.Fatal(err)
		}
		perTurn := map[int]int64{}
		before := dirBytes(b, data)
		var last *responses.Response
		for turn := 1; turn < turns; turn++ {
			last = benchTurn(b, client, c.ID, turn)
			now := dirBytes(b, data)
			perTurn[turn] = now - before
			before = now
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		st = startParkStack(b, o)
		client = openaiClient(st.Stack)
		// The items before the last turn, for the cold server below.
		earlier := rawItems(b, st.URL(), c.ID)
		final := benchTurn(b, client, c.ID, turns)
		perTurn[turns] = dirBytes(b, data) - before
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		prompt, cached := int(final.Usage.InputTokens), int(final.Usage.InputTokensDetails.CachedTokens)
		added := prompt - int(last.Usage.InputTokens)
		evaluated := prompt - cached
		if 2*evaluated > prompt {
			b.Fatalf("after the restart turn %d evaluated %d of %d prompt tokens", turns, evaluated, prompt)
		}

		// The same prompt, whole, on a server that has cached nothing.
		cold := startParkStack(b, app.Options{ModelPath: o.ModelPath, Ctx: o.Ctx, DataDir: b.TempDir()})
		var cc struct{ ID string }
		postJSON(b, cold.URL()+"/v1/conversations", map[string]any{}, &cc)
		for i := 0; i < len(earlier); i += 20 {
			var added struct{ Data []json.RawMessage }
			postJSON(b, cold.URL()+"/v1/conversations/"+cc.ID+"/items", map[string]any{"items": earlier[i:min(i+20, len(earlier))]}, &added)
		}
		whole := benchTurn(b, openaiClient(cold.Stack), cc.ID, turns)
		if whole.Usage.InputTokens != final.Usage.InputTokens {
			b.Fatalf("the cold server's prompt is %d tokens, the conversation's %d", whole.Usage.InputTokens, final.Usage.InputTokens)
		}
		coldEval := int(whole.Usage.InputTokens - whole.Usage.InputTokensDetails.CachedTokens)

		b.ReportMetric(float64(prompt), "prompt-tokens")
		b.ReportMetric(float64(evaluated), "evaluated-after-restart")
		b.ReportMetric(float64(added), "tokens-added-by-turn")
		b.ReportMetric(float64(coldEval), "evaluated-cold")
		for _, t := range []int{1, 10, turns} {
			b.ReportMetric(float64(perTurn[t]), fmt.Sprintf("disk-bytes-turn%d", t))
		}
		b.Logf("turn %d after a restart: %d prompt tokens, %d evaluated (the turn added %d; cold, whole: %d); disk per turn: %d, %d, %d bytes at turns 1, 10, %d",
			turns, prompt, evaluated, added, coldEval, perTurn[1], perTurn[10], perTurn[turns], turns)
	}
}

// benchTurn is turn n of the benchmark's conversation: about 200 tokens,
// the question and a 32-token answer.
func benchTurn(b *testing.B, client openai.Client, id string, n int) *responses.Response {
	b.Helper()
	text := fmt.Sprintf("Turn %d. ", n) + strings.Repeat(fmt.Sprintf("Describe step %d of the plan in some detail, with its risks. ", n), 5)
	r, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:           "tiny",
		Conversation:    responses.ResponseNewParamsConversationUnion{OfString: openai.String(id)},
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(text)},
		MaxOutputTokens: openai.Int(32),
		Temperature:     openai.Float(0),
	})
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		b.Fatalf("turn %d: %d %s", n, apiErr.StatusCode, apiErr.Message)
	}
	if err != nil {
		b.Fatalf("turn %d: %v", n, err)
	}
	return r
}

// rawItems are conversation id's items on the server at base, oldest
// first, as it lists them.
func rawItems(b *testing.B, base, id string) []json.RawMessage {
	b.Helper()
	var all []json.RawMessage
	after := ""
	for {
		resp, err := http.Get(base + "/v1/conversations/" + id + "/items?order=asc&limit=100" + after)
		if err != nil {
			b.Fatal(err)
		}
		var page struct {
			Data    []json.RawMessage `json:"data"`
			LastID  string            `json:"last_id"`
			HasMore bool              `json:"has_more"`
		}
		err = json.NewDecoder(resp.Body).Decode(&page)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("listing items: %d %v", resp.StatusCode, err)
		}
		all = append(all, page.Data...)
		if !page.HasMore {
			return all
		}
		after = "&after=" + page.LastID
	}
}

// dirBytes is what the files under dir hold.
func dirBytes(b *testing.B, dir string) int64 {
	b.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}

// BenchmarkResponseChainDisk is the same 50 turns chained by
// previous_response_id: the disk each stored response added at turns 1,
// 10 and 50, with the chain store (each item written once) and without it
// (each record holding its whole conversation, the data directory's
// chains store unopenable).
//
//	go test ./e2e/ -run '^$' -bench BenchmarkResponseChainDisk -benchtime 1x
func BenchmarkResponseChainDisk(b *testing.B) {
	for _, chains := range []bool{true, false} {
		b.Run(map[bool]string{true: "chains", false: "whole-records"}[chains], func(b *testing.B) {
			for range b.N {
				data := b.TempDir()
				if !chains {
					// A file where the chain store's directory would be.
					if err := os.WriteFile(filepath.Join(data, "chains"), nil, 0o644); err != nil {
						b.Fatal(err)
					}
				}
				st := startParkStack(b, app.Options{ModelPath: tinyModel(b), DataDir: data, Ctx: 16384})
				client := openaiClient(st.Stack)
				perTurn := map[int]int64{}
				before, prev := dirBytes(b, data), ""
				for turn := 1; turn <= 50; turn++ {
					text := fmt.Sprintf("Turn %d. ", turn) + strings.Repeat(fmt.Sprintf("Describe step %d of the plan in some detail, with its risks. ", turn), 5)
					p := responses.ResponseNewParams{Model: "tiny", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)},
						MaxOutputTokens: openai.Int(32), Temperature: openai.Float(0)}
					if prev != "" {
						p.PreviousResponseID = openai.String(prev)
					}
					r, err := client.Responses.New(context.Background(), p)
					if err != nil {
						b.Fatalf("turn %d: %v", turn, err)
					}
					prev = r.ID
					now := dirBytes(b, data)
					perTurn[turn], before = now-before, now
				}
				for _, t := range []int{1, 10, 50} {
					b.ReportMetric(float64(perTurn[t]), fmt.Sprintf("disk-bytes-turn%d", t))
				}
				b.Logf("disk per turn: %d, %d, %d bytes at turns 1, 10, 50", perTurn[1], perTurn[10], perTurn[50])
			}
		})
	}
}
