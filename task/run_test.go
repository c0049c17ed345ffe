package task

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
	"superfluid/reply"
	"superfluid/sched"
)

// numberText spells each token as its number and a space.
type numberText struct{}

func (numberText) Tokenize(string, bool, bool) ([]engine.Token, error) { return nil, nil }
func (numberText) AppendPiece(dst []byte, tok engine.Token, _ bool) []byte {
	return append(strconv.AppendInt(dst, int64(tok), 10), ' ')
}
func (numberText) Detokenize([]engine.Token, bool) string { return "" }

// runScheduler is a scheduler over the fake engine, running until the
// test ends.
func runScheduler(t *testing.T) (*enginetest.Fake, *sched.Scheduler) {
	t.Helper()
	eng := enginetest.New(4, 64, 4, 512, nil)
	sc, err := sched.New(eng, &seqCache{eng: eng, free: []int32{3, 2, 1, 0}}, sched.Config{Lanes: 4})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sc.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return eng, sc
}

// recordingSink keeps each choice's text and how many times each end was
// heard.
type recordingSink struct {
	text   []strings.Builder
	ended  []int
	failed int
	stopAt int // the byte count of text at which a choice ends itself (EndChoice); 0 never
}

func (s *recordingSink) Delta(i int, _ []reply.Event, d *Delta) error {
	s.text[i].Write(d.Text)
	if s.stopAt > 0 && s.text[i].Len() >= s.stopAt {
		return EndChoice
	}
	return nil
}

func (s *recordingSink) Ended(i int, _ *Turn) error { s.ended[i]++; return nil }
func (s *recordingSink) Failed(error)               { s.failed++ }

// Every choice runs to its end and the sink hears each choice's text —
// the same text the collected outcome holds — and its end once; a choice
// its API ends (EndChoice) is no failure and ends with what it showed.
func TestRunTellsTheSinkEveryChoice(t *testing.T) {
	eng, sc := runScheduler(t)
	m := &Model{Name: "fake", Desc: eng.Descriptor(), Text: numberText{}, Sched: sc}
	for _, c := range []struct {
		name   string
		part   string
		n      int
		stopAt int
	}{{"one inline", "", 1, 0}, {"three", "choice", 3, 0}, {"ended by the API", "choice", 2, 12}} {
		t.Run(c.name, func(t *testing.T) {
			req := &Request{Collect: true, Part: c.part}
			for i := range c.n {
				s := Spec{Prompt: []engine.Token{1, 7, 8, 9}, Class: sched.Chat, MaxTokens: 10, Sampling: engine.Greedy()}
				req.Choices = append(req.Choices, new(s.WithSeed(i)))
			}
			sink := &recordingSink{text: make([]strings.Builder, c.n), ended: make([]int, c.n), stopAt: c.stopAt}
			turns, err := Run(context.Background(), m, req, sink)
			if err != nil || sink.failed != 0 {
				t.Fatalf("Run: %v (%d failures heard)", err, sink.failed)
			}
			for i, tr := range turns {
				got := sink.text[i].String()
				if sink.ended[i] != 1 || got == "" || string(tr.Text) != got {
					t.Errorf("choice %d: ended %d times, sink heard %q, outcome %q", i, sink.ended[i], got, tr.Text)
				}
				// Ended by its API, the choice reads no further (whether the
				// engine was still generating when it was cancelled is a race).
				if c.stopAt > 0 && (tr.Completed >= 10 || len(got) > c.stopAt+4) {
					t.Errorf("choice %d ended by its API: %d tokens, %q", i, tr.Completed, got)
				}
				if c.stopAt == 0 && tr.Finish != "length" && tr.Finish != "stop" {
					t.Errorf("choice %d: finish %q", i, tr.Finish)
				}
			}
		})
	}
}
