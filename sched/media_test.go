package sched

import (
	"crypto/sha256"
	"math"
	"slices"
	"strings"
	"testing"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

// testImage is an image of n fake rows whose values come from name; encodes
// counts its Encode calls.
type testImage struct {
	name    string
	n       int
	encodes int
}

func (im *testImage) span(at int) MediaSpan {
	return MediaSpan{At: at, N: im.n, Digest: sha256.Sum256([]byte(im.name)), Encode: func() ([]float32, error) {
		im.encodes++
		rows := make([]float32, im.n*enginetest.RowWidth)
		for i := range rows {
			rows[i] = float32(len(im.name)*31+i) + float32(im.name[0])/7
		}
		return rows, nil
	}}
}

// mediaRequest is a prompt of prefix tokens, the image, and suffix tokens.
func mediaRequest(seed, prefix, suffix int, im *testImage) Request {
	prompt := promptOf(seed, prefix+im.n+suffix)
	clear(prompt[prefix : prefix+im.n]) // placeholders
	return Request{Prompt: prompt, MaxTokens: 6, Media: []MediaSpan{im.span(prefix)}}
}

// runMedia runs req alone on a fresh harness of batch tokens per step and
// returns its output and the plans' prefills.
func runMedia(t *testing.T, batch int, req Request) ([]engine.Token, []engine.Plan) {
	t.Helper()
	h := newHarness(t, 2, batch, Config{}).fast()
	h.eng.KeepPlans = true
	freed := 0
	req.MediaDone = func() { freed++ }
	h.submit("a", req)
	h.run(200)
	if r := h.result("a"); r.Err != nil {
		t.Fatalf("result: %v", r.Err)
	}
	if freed != 1 {
		t.Fatalf("MediaDone ran %d times, want once", freed)
	}
	return h.tokens("a"), h.eng.Plans
}

// An image's rows are prompt rows: a prompt with an image runs to the end,
// the span in chunks of the step budget when it does not fit one, no text
// prefill ever covering its positions, and the output is the same however
// it was chunked; the rows are encoded once. Another image changes the
// output.
func TestMediaSpanPrefill(t *testing.T) {
	cat := &testImage{name: "cat", n: 40}
	req := mediaRequest(1, 5, 9, cat)
	whole, _ := runMedia(t, 128, req)
	if len(whole) == 0 {
		t.Fatal("no output")
	}
	cat.encodes = 0
	chunked, plans := runMedia(t, 16, req)
	if !slices.Equal(chunked, whole) {
		t.Errorf("chunked by 16: %v, in one step: %v", chunked, whole)
	}
	if cat.encodes != 1 {
		t.Errorf("the image was encoded %d times, want once", cat.encodes)
	}
	for _, pl := range plans {
		for _, f := range pl.Prefills {
			if int(f.Offset) < 5+40 && int(f.Offset+f.Count) > 5 {
				t.Errorf("a text prefill [%d, +%d) covers the image at [5, 45)", f.Offset, f.Count)
			}
		}
	}
	dog := &testImage{name: "dog", n: 40}
	other, _ := runMedia(t, 128, mediaRequest(1, 5, 9, dog))
	if slices.Equal(other, whole) {
		t.Error("another image gave the same output: rows do not reach the model")
	}
}

// Warm by digest: a next turn that repeats the conversation with its image
// finds the image's span cached (the rows are not encoded again) and
// generates what it does cold; a turn with another image at the same place
// is cached only up to the image.
func TestMediaWarmByDigest(t *testing.T) {
	cat := &testImage{name: "cat", n: 30}
	first := mediaRequest(2, 6, 4, cat)
	h := newHarness(t, 2, 64, Config{}).fast()
	h.submit("first", first)
	h.run(200)
	reply := h.tokens("first")
	turn := func(im *testImage) Request {
		next := first
		next.Prompt = append(slices.Clone(first.Prompt), reply...)
		next.Prompt = append(next.Prompt, promptOf(9, 5)...)
		next.Media = []MediaSpan{im.span(6)}
		return next
	}
	cat.encodes = 0
	second := turn(cat)
	j := h.submit("second", second)
	h.run(200)
	if r := h.result("second"); r.Err != nil {
		t.Fatalf("second turn: %v", r.Err)
	}
	if j.cached < 6+30 {
		t.Errorf("the second turn found %d tokens cached, want past the image (%d)", j.cached, 6+30)
	}
	if cat.encodes != 0 {
		t.Errorf("the cached image was encoded %d times", cat.encodes)
	}
	cold, _ := runMedia(t, 64, turn(&testImage{name: "cat", n: 30}))
	if got := h.tokens("second"); !slices.Equal(got, cold) {
		t.Errorf("warm %v, cold %v", got, cold)
	}

	dog := &testImage{name: "dog", n: 30}
	k := h.submit("third", turn(dog))
	h.run(200)
	if k.cached > 6 {
		t.Errorf("another image: %d tokens cached, want at most the %d before it", k.cached, 6)
	}
	if dog.encodes != 1 {
		t.Errorf("the new image was encoded %d times, want once", dog.encodes)
	}
	coldDog, _ := runMedia(t, 64, turn(&testImage{name: "dog", n: 30}))
	if got := h.tokens("third"); !slices.Equal(got, coldDog) {
		t.Errorf("another image warm %v, cold %v", got, coldDog)
	}
}

// Media key tokens are negative, below every LoRA namespace's tags, in
// int32, a function of the digest and the row alone.
func TestMediaKeyTokens(t *testing.T) {
	a := mediaKeyTokens(sha256.Sum256([]byte("a")), 64)
	b := mediaKeyTokens(sha256.Sum256([]byte("b")), 64)
	if !slices.Equal(a, mediaKeyTokens(sha256.Sum256([]byte("a")), 64)) {
		t.Error("not deterministic")
	}
	same := 0
	for i := range a {
		if a[i] == b[i] {
			same++
		}
		for _, tok := range []engine.Token{a[i], b[i]} {
			if int64(tok) > -mediaKeyBase || int64(tok) < math.MinInt32 {
				t.Fatalf("key token %d outside [MinInt32, -2^30]", tok)
			}
		}
	}
	if same > 1 {
		t.Errorf("two digests share %d of 64 key tokens", same)
	}
	for _, vocab := range []int{1000, 151936, 262144} {
		c := newCacheNamespaces(vocab)
		lowest := c.tag(c.max-1, []engine.Token{engine.Token(vocab - 1)})[0]
		if int64(lowest) <= -mediaKeyBase {
			t.Errorf("vocab %d: LoRA tag %d reaches the media keys", vocab, lowest)
		}
		if c.max < 64 {
			t.Errorf("vocab %d: only %d LoRA namespaces", vocab, c.max)
		}
	}
}

func TestMediaRefusals(t *testing.T) {
	im := &testImage{name: "x", n: 4}
	d := enginetest.New(1, 64, 4, 4096, nil).Descriptor()
	base := func() Request { return mediaRequest(3, 2, 2, im) }
	cases := []struct {
		name string
		edit func(*Request)
		want string
	}{
		{"reaches the end", func(r *Request) { r.Media[0].At = len(r.Prompt) - 4 }, "end"},
		{"no rows", func(r *Request) { r.Media[0].N = 0 }, "no rows"},
		{"no encoder", func(r *Request) { r.Media[0].Encode = nil }, "no rows"},
		{"overlap", func(r *Request) { r.Media = append(r.Media, im.span(3)) }, "overlaps"},
	}
	for _, c := range cases {
		r := base()
		c.edit(&r)
		if err := r.validate(d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	r := base()
	r.Prompt[2] = -5 // a placeholder may be anything
	if err := r.validate(d); err != nil {
		t.Errorf("a placeholder outside the vocabulary: %v", err)
	}
}
