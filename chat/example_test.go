package chat_test

import (
	"fmt"

	"superfluid/chat"
)

func Example() {
	// A model's template and token texts come from its file (chat.FromGGUF);
	// parse once at load, render per request.
	tmpl, err := chat.Parse(chat.ChatML, chat.Options{BOS: "<|endoftext|>", EOS: "<|im_end|>"})
	if err != nil {
		panic(err)
	}
	prompt, err := tmpl.Render([]chat.Message{
		{Role: chat.RoleSystem, Content: "Be brief."},
		{Role: chat.RoleUser, Content: "Hi"},
	}, true)
	if err != nil {
		panic(err) // the HTTP layer answers 400 here
	}
	fmt.Print(prompt)
	// Output:
	// <|im_start|>system
	// Be brief.<|im_end|>
	// <|im_start|>user
	// Hi<|im_end|>
	// <|im_start|>assistant
}
