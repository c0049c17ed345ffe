package task

import (
	"errors"

	"superfluid/chat"
	"superfluid/engine"
)

// Every API's conversation becomes prompt text here: OpenAI chat, the
// Anthropic messages, Ollama's chat and generate, and /apply-template map
// their bodies onto a chat.Request and render it through the model's
// template with Template.Prompt, so the same conversation prompts the
// model alike whichever API carried it.

// ChatPrompt renders r with the model's chat template. A template that
// refuses the conversation (raise_exception) is a bad request carrying
// the template's own message, which says what to change.
func ChatPrompt(m *Model, r chat.Request) (string, error) {
	if m.Chat == nil {
		return "", NoChatTemplate(m, "use the completion endpoints")
	}
	if err := CheckPromptBytes(m.Desc, "messages", requestBytes(r)); err != nil {
		return "", err
	}
	text, err := m.Chat.Prompt(r)
	if raise := (*chat.RaiseError)(nil); errors.As(err, &raise) {
		return "", BadParam("messages", "the model's chat template refuses this conversation: %s", raise.Message)
	}
	if err != nil {
		return "", BadRequest("the model's chat template cannot render this conversation: %v", err)
	}
	return text, nil
}

// NoChatTemplate is the error for a chat request to a model served
// without a chat template, with the reason it was refused at load when it
// was, and what to do instead.
func NoChatTemplate(m *Model, instead string) *Error {
	if m.ChatRefused != nil {
		return BadRequest("the model has no usable chat template (%v); %s", m.ChatRefused, instead)
	}
	return BadRequest("the model has no chat template; %s", instead)
}

// requestBytes is how much text r carries into the template, which is
// bounded before rendering as every prompt is before tokenizing.
func requestBytes(r chat.Request) int {
	n := 0
	for _, msg := range r.Messages {
		n += len(msg.Content) + len(msg.ReasoningContent) + len(msg.ToolCallID) + len(msg.Name)
		for _, c := range msg.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range r.Tools {
		n += len(t)
	}
	for k, v := range r.Kwargs {
		n += len(k) + len(v)
	}
	return n
}

// RenderChat renders a conversation for the assistant's next turn and
// tokenizes it.
func RenderChat(m *Model, msgs []chat.Message) ([]engine.Token, error) {
	text, err := ChatPrompt(m, chat.Request{Messages: msgs, AddGenerationPrompt: true})
	if err != nil {
		return nil, err
	}
	prompt, err := Tokenize(m, text, true)
	if err != nil {
		return nil, err
	}
	return prompt, CheckPrompt(m.Desc, prompt)
}

// CallOnlyTurns marks the assistant turns that carry calls and no text as
// having no content, for the APIs that cannot send OpenAI's null: a turn
// of tool_use blocks, function_call items, or Ollama's tool_calls beside
// an empty content.
func CallOnlyTurns(msgs []chat.Message) []chat.Message {
	for i := range msgs {
		if msgs[i].Role == chat.RoleAssistant && len(msgs[i].ToolCalls) > 0 && msgs[i].Content == "" {
			msgs[i].NoContent = true
		}
	}
	return msgs
}
