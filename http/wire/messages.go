package wire

// OpenAI chat messages, which llama.cpp's /apply-template takes too, read
// onto the template's roles.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"superfluid/chat"
	"superfluid/media"
	"superfluid/task"
)

// Message is a chat message as OpenAI's clients send it.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string, or an array of content parts
	Name    string          `json:"name,omitempty"`
	// An assistant turn's calls, and the call a tool turn answers.
	ToolCalls  []MessageToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
	// An assistant turn's reasoning, as llama-server and DeepSeek send it.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type MessageToolCall struct {
	ID       string              `json:"id"`
	Type     string              `json:"type"`
	Function MessageFunctionCall `json:"function"`
}

type MessageFunctionCall struct {
	Name string `json:"name"`
	// Arguments is a JSON string holding a JSON object, as OpenAI sends it.
	Arguments json.RawMessage `json:"arguments"`
}

type ContentPart struct {
	Type       string          `json:"type"`
	Text       string          `json:"text"`
	ImageURL   *ImageURLPart   `json:"image_url,omitempty"`
	InputAudio *InputAudioPart `json:"input_audio,omitempty"`
}

// InputAudioPart is an input_audio part's audio: base64 file bytes and the
// container they are in. The container is told by the bytes (as
// llama-server does); format is checked only to be one of those read.
type InputAudioPart struct {
	Data   string `json:"data"`
	Format string `json:"format"`
}

// ImageURLPart is an image_url part's image: a data URL, or an http(s)
// URL the server fetches when it allows remote media (FetchMedia).
type ImageURLPart struct {
	URL    string `json:"url"`
	Detail string `json:"detail"`
}

// ChatMessages maps OpenAI messages onto the template's roles; content may
// be a string or an array of text parts. An assistant turn's tool calls
// reach the template with their arguments decoded to an object, as
// transformers passes them. Image parts are refused (ChatMessagesMedia
// takes them).
func ChatMessages(in []Message) ([]chat.Message, error) {
	msgs, images, _, err := ChatMessagesMedia(in, task.MediaMarker)
	if err == nil && len(images) > 0 {
		return nil, BadParam("messages", "messages: image_url and input_audio parts are not supported on this route")
	}
	return msgs, err
}

// ChatMessagesMedia is ChatMessages taking image_url and input_audio
// parts too: each is decoded (data URLs, base64, bounded before decoding)
// and stands in its message's text as marker, in order of appearance
// (images holds the request's media files, audio among them). An http(s) URL's
// image is left for FetchMedia: its slot in images is nil, and remote
// says where it is to be fetched from.
func ChatMessagesMedia(in []Message, marker string) ([]chat.Message, [][]byte, []media.Remote, error) {
	var (
		images [][]byte
		remote []media.Remote
	)
	msgs, err := chatMessages(in, func(i int, raw json.RawMessage) (string, error) {
		return contentMedia(raw, marker, func(j int, u string) error {
			return ImageURL(u, "messages", fmt.Sprintf("messages[%d].content[%d].image_url", i, j), &images, &remote)
		}, func(p *InputAudioPart) error {
			b, err := inputAudio(p, len(images))
			if err == nil {
				images = append(images, b)
			}
			return err
		})
	})
	return msgs, images, remote, err
}

// ImageURL reads an image URL as OpenAI's APIs send it: a data URL's
// image is decoded into images, an http(s) URL's slot left for FetchMedia
// and the URL kept in remote (field and at name it in refusals).
func ImageURL(u, field, at string, images *[][]byte, remote *[]media.Remote) error {
	if len(*images) >= media.MaxImages {
		return fmt.Errorf("a request carries at most %d images", media.MaxImages)
	}
	if !strings.HasPrefix(u, "data:") {
		return remoteImage(u, field, at, images, remote)
	}
	_, b, err := media.ParseDataURL(u, MaxMediaBytes)
	if err != nil {
		return err
	}
	*images = append(*images, b)
	return nil
}

func chatMessages(in []Message, content func(i int, raw json.RawMessage) (string, error)) ([]chat.Message, error) {
	if len(in) == 0 {
		return nil, BadParam("messages", "messages must not be empty")
	}
	out := make([]chat.Message, 0, len(in))
	for i, msg := range in {
		role := msg.Role
		switch role {
		case "developer":
			role = chat.RoleSystem
		case chat.RoleSystem, chat.RoleUser, chat.RoleAssistant, chat.RoleTool:
		default:
			return nil, BadParam("messages", "messages[%d]: unknown role %q", i, msg.Role)
		}
		text, err := content(i, msg.Content)
		if err != nil {
			return nil, BadParam("messages", "messages[%d].content: %v", i, err)
		}
		if len(msg.ToolCalls) > 0 && role != chat.RoleAssistant {
			return nil, BadParam("messages", "messages[%d].tool_calls: only assistant messages carry tool calls", i)
		}
		calls, err := MessageToolCalls(i, msg.ToolCalls)
		if err != nil {
			return nil, err
		}
		out = append(out, chat.Message{Role: role, Content: text, NoContent: task.IsNull(msg.Content), ReasoningContent: msg.ReasoningContent,
			ToolCalls: calls, ToolCallID: msg.ToolCallID, Name: msg.Name})
	}
	return out, nil
}

// MessageToolCalls reads message i's tool calls. OpenAI sends arguments as a
// JSON string holding an object; an object itself is taken too (some
// clients send one). Anything else is refused naming the field, since a
// template would otherwise print garbage where the call's arguments go.
func MessageToolCalls(i int, in []MessageToolCall) ([]chat.ToolCall, error) {
	out := make([]chat.ToolCall, 0, len(in))
	for j, c := range in {
		field := fmt.Sprintf("messages[%d].tool_calls[%d]", i, j)
		if c.Type != "" && c.Type != "function" {
			return nil, BadParam("messages", "%s.type: %q is not a function call", field, c.Type)
		}
		if c.Function.Name == "" {
			return nil, BadParam("messages", "%s.function.name: a tool call needs a name", field)
		}
		args, err := CallArguments(c.Function.Arguments)
		if err != nil {
			return nil, BadParam("messages", "%s.function.arguments: %v", field, err)
		}
		out = append(out, chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args})
	}
	return out, nil
}

// contentMedia reads message content as ContentText does, taking
// image_url parts through image (the part's index and URL),
// input_audio parts through audio, and the place of each as marker.
func contentMedia(raw json.RawMessage, marker string, image func(j int, url string) error, audio func(p *InputAudioPart) error) (string, error) {
	var parts []ContentPart
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &parts) != nil {
		return ContentText(raw)
	}
	text := ""
	for j, p := range parts {
		switch p.Type {
		case "text":
			text += p.Text
		case "image_url":
			if p.ImageURL == nil || p.ImageURL.URL == "" {
				return "", fmt.Errorf("part %d: an image_url part needs image_url.url", j)
			}
			if err := image(j, p.ImageURL.URL); err != nil {
				return "", fmt.Errorf("part %d: image_url: %v", j, err)
			}
			text += marker
		case "input_audio":
			if err := audio(p.InputAudio); err != nil {
				return "", fmt.Errorf("part %d: %v", j, err)
			}
			text += marker
		default:
			return "", fmt.Errorf("content parts of type %q are not supported (text, image_url and input_audio only)", p.Type)
		}
	}
	return text, nil
}

// inputAudio decodes an input_audio part's file (have: the request's media
// files so far, bounded as images are).
func inputAudio(p *InputAudioPart, have int) ([]byte, error) {
	if p == nil || p.Data == "" {
		return nil, fmt.Errorf("an input_audio part needs input_audio.data (base64)")
	}
	if p.Format != "" && !slices.Contains(media.AudioFormats, p.Format) {
		return nil, fmt.Errorf("input_audio.format %q is not supported (wav, mp3 or flac)", p.Format)
	}
	if have >= media.MaxImages {
		return nil, fmt.Errorf("a request carries at most %d media files", media.MaxImages)
	}
	b, err := media.DecodeBase64(p.Data, MaxMediaBytes)
	if err != nil {
		return nil, fmt.Errorf("input_audio.data: %v", err)
	}
	if !media.IsAudio(b) {
		return nil, fmt.Errorf("input_audio.data is not WAV, MP3 or FLAC audio (unknown magic bytes)")
	}
	return b, nil
}

// ContentText reads message content: a string, null, or text parts.
func ContentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []ContentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("expected a string or an array of content parts")
	}
	text := ""
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content parts of type %q are not supported (text only)", p.Type)
		}
		text += p.Text
	}
	return text, nil
}
