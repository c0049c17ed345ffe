package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"

	"superfluid/app"
	"superfluid/synth"
)

// imageInput is a user message of text and an input_image part.
func imageInput(text, url string) responses.ResponseNewParamsInputUnion {
	content := responses.ResponseInputMessageContentListParam{
		responses.ResponseInputContentParamOfInputText(text),
		{OfInputImage: &responses.ResponseInputImageParam{ImageURL: openai.String(url), Detail: responses.ResponseInputImageDetailAuto}},
	}
	return responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser),
	}}
}

// A Responses request with an input_image (a data URL), through the
// official client: answered, input_tokens counting the image's rows; the
// turn that continues it by previous_response_id (its items in the chain
// store) reads the image again and is warm past it; the whole request
// again answers the same; a remote URL without the flag and a file_id are
// 400s naming input.
func TestImageResponses(t *testing.T) {
	st := startStack(t, app.Options{ModelPath: model(t, "tiny", sharedVocab(t, "ggml-vocab-qwen2.5-instruct.gguf")),
		MMProj: mmprojFile(t), DataDir: t.TempDir()})
	client := openaiClient(st)
	url := "data:image/png;base64," + pngOf(t, 40, 56, 41)
	params := responses.ResponseNewParams{
		Model:           "tiny",
		Input:           imageInput("What is in this picture?", url),
		MaxOutputTokens: openai.Int(10),
		Temperature:     openai.Float(0),
	}
	first, err := client.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if first.Status == "failed" || first.Usage.OutputTokens == 0 {
		t.Fatalf("first: %s", first.RawJSON())
	}
	if first.Usage.InputTokens < synth.MMProjImageTokens+5 {
		t.Errorf("input_tokens %d: the image's %d rows are not counted", first.Usage.InputTokens, synth.MMProjImageTokens)
	}
	next, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:              "tiny",
		PreviousResponseID: openai.String(first.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("And its colours?")},
		MaxOutputTokens:    openai.Int(6),
		Temperature:        openai.Float(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	if next.Status == "failed" || next.Usage.InputTokens <= first.Usage.InputTokens {
		t.Fatalf("the next turn: %s", next.RawJSON())
	}
	if next.Usage.InputTokensDetails.CachedTokens < synth.MMProjImageTokens {
		t.Errorf("the next turn: %d cached tokens, want past the image's %d rows", next.Usage.InputTokensDetails.CachedTokens, synth.MMProjImageTokens)
	}
	again, err := client.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if again.OutputText() != first.OutputText() || again.Usage.InputTokens != first.Usage.InputTokens {
		t.Errorf("again %q (%d input tokens), first %q (%d)", again.OutputText(), again.Usage.InputTokens, first.OutputText(), first.Usage.InputTokens)
	}

	// Streamed, the same answer (the stream's job holds the image).
	stream := client.Responses.NewStreaming(context.Background(), params)
	var streamed *responses.Response
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.completed" || ev.Type == "response.incomplete" {
			r := ev.Response
			streamed = &r
		}
	}
	if err := stream.Err(); err != nil || streamed == nil || streamed.OutputText() != first.OutputText() {
		t.Errorf("streamed: %v, %v, want %q", err, streamed, first.OutputText())
	}
	stream.Close()

	// A conversation keeps the image part among its items; its next turn
	// reads it back and is warm past it.
	conv, err := client.Conversations.New(context.Background(), conversations.ConversationNewParams{})
	if err != nil {
		t.Fatal(err)
	}
	inConv := params
	inConv.Conversation = responses.ResponseNewParamsConversationUnion{OfString: openai.String(conv.ID)}
	if _, err := client.Responses.New(context.Background(), inConv); err != nil {
		t.Fatal(err)
	}
	items, err := client.Conversations.Items.List(context.Background(), conv.ID, conversations.ItemListParams{})
	if err != nil || !strings.Contains(items.RawJSON(), `"input_image"`) {
		t.Errorf("the conversation's items: %v %s", err, items.RawJSON())
	}
	inConv.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("And its colours?")}
	turn2, err := client.Responses.New(context.Background(), inConv)
	if err != nil {
		t.Fatal(err)
	}
	if turn2.Usage.InputTokensDetails.CachedTokens < synth.MMProjImageTokens {
		t.Errorf("the conversation's next turn: %d cached tokens, want past the image's %d rows", turn2.Usage.InputTokensDetails.CachedTokens, synth.MMProjImageTokens)
	}

	params.Input = imageInput("and?", "https://example.com/x.png")
	_, err = client.Responses.New(context.Background(), params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input" || !strings.Contains(apiErr.Message, "--allow-remote-media") {
		t.Errorf("a remote input_image without the flag: %v", err)
	}
	byFile := func(id string) responses.ResponseNewParamsInputUnion {
		content := responses.ResponseInputMessageContentListParam{
			responses.ResponseInputContentParamOfInputText("What is in this picture?"),
			{OfInputImage: &responses.ResponseInputImageParam{FileID: openai.String(id), Detail: responses.ResponseInputImageDetailAuto}},
		}
		return responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{responses.ResponseInputItemParamOfMessage(content, responses.EasyInputMessageRoleUser)}}
	}
	params.Input = byFile("file-abc")
	_, err = client.Responses.New(context.Background(), params)
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "input" || !strings.Contains(apiErr.Message, "file_id") {
		t.Errorf("an input_image naming no file: %v", err)
	}
	// The same image uploaded (purpose vision) and named by file_id: the
	// same answer, warm by its digest.
	png, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(url, "data:image/png;base64,"))
	f, err := client.Files.New(context.Background(), openai.FileNewParams{File: openai.File(bytes.NewReader(png), "pic.png", "image/png"), Purpose: openai.FilePurposeVision})
	if err != nil {
		t.Fatal(err)
	}
	params.Input = byFile(f.ID)
	fromFile, err := client.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	if fromFile.OutputText() != first.OutputText() || fromFile.Usage.InputTokensDetails.CachedTokens < synth.MMProjImageTokens {
		t.Errorf("by file_id: %q with %d cached tokens, want %q warm past the image", fromFile.OutputText(), fromFile.Usage.InputTokensDetails.CachedTokens, first.OutputText())
	}
}
