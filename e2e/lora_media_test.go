package e2e

import (
	"slices"
	"testing"

	"superfluid/app"
	"superfluid/synth"
)

// loraImageCompletion is imageCompletion under lora (nil: the field left
// out).
func loraImageCompletion(t *testing.T, st *app.Stack, text string, lora any, images ...string) llamaCompletion {
	t.Helper()
	body := map[string]any{"prompt": map[string]any{"prompt_string": text, "multimodal_data": images},
		"n_predict": 16, "temperature": 0, "n_probs": 5, "return_tokens": true}
	if lora != nil {
		body["lora"] = lora
	}
	return llamaDo[llamaCompletion](t, st, "/completion", jsonBody(body))
}

// An image under an adapter set: the same image and text under one set
// twice is warm past the image; under another set, or the base model, it
// starts cold — the rows an adapter's KV holds serve no other set — and
// answers as a lone run under that set does.
func TestLoRAImagesKeyedBySet(t *testing.T) {
	const text = "<__media__> What does this picture show? Answer in a few words."
	adapters := []app.LoRAFile{{Path: loraFile(t, 1)}, {Path: loraFile(t, 2)}}
	img := pngOf(t, 56, 56, 5)
	st := startStack(t, app.Options{Lanes: 2, MMProj: mmprojFile(t), LoRA: adapters})
	underA := loraImageCompletion(t, st, text, scaled(0, 1), img)
	againA := loraImageCompletion(t, st, text, scaled(0, 1), img)
	t.Logf("set A twice: %d then %d of %d prompt tokens cached", underA.TokensCached, againA.TokensCached, againA.TokensEvaluated)
	if againA.TokensCached < synth.MMProjImageTokens {
		t.Errorf("the same image under one set again: %d tokens cached, want past its %d rows", againA.TokensCached, synth.MMProjImageTokens)
	}
	if ok, why := sameOrNearTie(againA, underA); !ok {
		t.Errorf("the warm answer differs: %s", why)
	}
	underB := loraImageCompletion(t, st, text, scaled(1, 1), img)
	base := loraImageCompletion(t, st, text, nil, img)
	for name, got := range map[string]llamaCompletion{"set B": underB, "the base model": base} {
		if got.TokensCached != 0 {
			t.Errorf("%s after set A: %d tokens cached", name, got.TokensCached)
		}
	}

	lone := startStack(t, app.Options{Lanes: 1, MMProj: mmprojFile(t), LoRA: adapters})
	loneB := loraImageCompletion(t, lone, text, scaled(1, 1), img)
	loneBase := loraImageCompletion(t, startStack(t, app.Options{Lanes: 1, MMProj: mmprojFile(t), LoRA: adapters}), text, nil, img)
	if ok, why := sameOrNearTie(underB, loneB); !ok {
		t.Errorf("set B after set A differs from its lone run: %s", why)
	}
	if ok, why := sameOrNearTie(base, loneBase); !ok {
		t.Errorf("the base model after set A differs from its lone run: %s", why)
	}
	// B first on the lone server, A after: A starts cold there too.
	if aAfterB := loraImageCompletion(t, lone, text, scaled(0, 1), img); aAfterB.TokensCached != 0 {
		t.Errorf("set A after set B: %d tokens cached", aAfterB.TokensCached)
	}
	if slices.Equal(underA.Tokens, loneB.Tokens) || slices.Equal(underA.Tokens, loneBase.Tokens) {
		t.Error("the sets answer alike: the test shows nothing")
	}
}
