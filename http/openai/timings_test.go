package openai

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/http/wire"
	"superfluid/sched"
	"superfluid/task"
)

// The usage chunk of a streamed chat carries llama.cpp's timings of the
// first choice: the prompt beyond its cached prefix, the tokens generated
// and the rates the server measured (the web page's speed figures).
func TestChatTimings(t *testing.T) {
	g := &task.Request{}
	g.Prompt = make([]engine.Token, 10)
	out := &choiceOut{TurnOut: wire.TurnOut{Outcome: task.Outcome{Completed: 20,
		Result: sched.Result{CachedTokens: 4, Prefill: 60 * time.Millisecond, Decode: 500 * time.Millisecond}}}}
	tm := chatTimings(g, []*choiceOut{out})
	if tm.CacheN != 4 || tm.PromptN != 6 || tm.PromptMS != 60 || tm.PredictedN != 20 || tm.PredictedMS != 500 || tm.PredictedPerSecond != 40 || tm.PromptPerSecond != 100 {
		t.Errorf("timings %+v", tm)
	}
	if none := chatTimings(g, nil); none != (wire.Timings{}) {
		t.Errorf("no choice: %+v", none)
	}
	b, err := json.Marshal(oaiChatChunk{Choices: []oaiChunkChoice{}, Timings: &tm})
	if err != nil || !strings.Contains(string(b), `"timings":{"cache_n":4,"prompt_n":6,`) {
		t.Errorf("the chunk: %s %v", b, err)
	}
}
