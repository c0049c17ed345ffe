package chat

import (
	"fmt"
	"sync"
	"testing"
)

// tenMessages is a system prompt and nine alternating turns of a few
// sentences each, a typical interactive request.
func tenMessages() []Message {
	msgs := []Message{{Role: RoleSystem, Content: "You are a helpful assistant. Answer briefly and cite sources when you can."}}
	for i := 1; i < 10; i++ {
		role := RoleUser
		if i%2 == 0 {
			role = RoleAssistant
		}
		msgs = append(msgs, Message{Role: role, Content: fmt.Sprintf("Turn %d: the quick brown fox jumps over the lazy dog, and then asks a follow-up question about it.", i)})
	}
	return msgs
}

func benchmarkRender(b *testing.B, src string) {
	tmpl := mustParse(b, src, Options{BOS: "<s>", EOS: "</s>"})
	msgs := tenMessages()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tmpl.Render(msgs, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderChatML(b *testing.B) { benchmarkRender(b, ChatML) }

func BenchmarkRenderLlama3(b *testing.B) { benchmarkRender(b, testdataTemplate(b, "llama-3.jinja")) }

func BenchmarkRenderQwen25(b *testing.B) {
	benchmarkRender(b, testdataTemplate(b, "qwen2.5-instruct.jinja"))
}

// BenchmarkParse shows what Render saves by not parsing per call.
func BenchmarkParse(b *testing.B) {
	src := testdataTemplate(b, "qwen2.5-instruct.jinja")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(src, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestConcurrentRender renders from many goroutines at once; run with
// -race it shows that a Template shares no mutable state between renders.
func TestConcurrentRender(t *testing.T) {
	tmpls := []*Template{
		mustParse(t, ChatML, Options{}),
		mustParse(t, testdataTemplate(t, "qwen2.5-instruct.jinja"), Options{}),
		mustParse(t, testdataTemplate(t, "deepseek-coder.jinja"), Options{BOS: "<s>"}),
		mustParse(t, testdataTemplate(t, "gemma.jinja"), Options{BOS: "<bos>"}),
	}
	msgs := tenMessages()
	want := make([]string, len(tmpls))
	for i, tmpl := range tmpls {
		out, err := tmpl.Render(msgs, true)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = out
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for n := range 50 {
				i := (g + n) % len(tmpls)
				out, err := tmpls[i].Render(msgs[:len(msgs)-(n%2)*2], n%3 == 0)
				if err != nil {
					t.Error(err)
					return
				}
				if n%2 == 0 && n%3 == 0 && out != want[i] {
					t.Errorf("template %d: concurrent render differs", i)
					return
				}
			}
		})
	}
	wg.Wait()
}
