package synth

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"superfluid/gguf"
)

func tiny(t *testing.T) Shape {
	s, err := ShapeByName("tiny")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func write(t *testing.T, o Options) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := Write(path, o); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestShapes(t *testing.T) {
	for _, name := range ShapeNames() {
		s, err := ShapeByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Error(err)
		}
	}
	s, _ := ShapeByName("0.5b")
	if s.Embd != 896 || s.Layers != 24 || s.Heads != 14 || s.KVHeads != 2 || s.FFN != 4864 || s.Vocab != 151936 || s.HeadDim() != 64 {
		t.Errorf("0.5b is not Qwen2.5-0.5B's shape: %+v", s)
	}
	_, err := ShapeByName("7b")
	if err == nil || !strings.Contains(err.Error(), "tiny, small, 0.5b") && !strings.Contains(err.Error(), "0.5b, small, tiny") {
		t.Errorf("unknown shape error %v does not list the valid names", err)
	}
	bad := Shape{Name: "x", Embd: 48, Layers: 1, Heads: 4, KVHeads: 2, FFN: 64, Ctx: 16}
	if bad.Validate() == nil {
		t.Error("embedding width 48 (not a multiple of 32) accepted")
	}
}

func TestDeterministic(t *testing.T) {
	o := Options{Shape: tiny(t), Type: "q8_0", Seed: 7}
	a, b := write(t, o), write(t, o)
	ra, _ := os.ReadFile(a)
	rb, _ := os.ReadFile(b)
	if !bytes.Equal(ra, rb) {
		t.Fatal("same options, different bytes")
	}
	o.Seed = 8
	c := write(t, o)
	da, _ := gguf.ModelDigest(a)
	dc, _ := gguf.ModelDigest(c)
	if da == dc {
		t.Fatal("different seeds, same digest")
	}
}

func TestTinyLayout(t *testing.T) {
	for _, typ := range []string{"f16", "q8_0", "q4_0"} {
		t.Run(typ, func(t *testing.T) {
			s := tiny(t)
			path := write(t, Options{Shape: s, Type: typ, Seed: 1})
			st, _ := os.Stat(path)
			if st.Size() < 100<<10 || st.Size() > 600<<10 {
				t.Errorf("tiny %s is %d bytes, want a few hundred KB", typ, st.Size())
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			u32 := map[string]uint32{
				"llama.context_length": 4096, "llama.embedding_length": 64, "llama.block_count": 2,
				"llama.feed_forward_length": 128, "llama.attention.head_count": 4,
				"llama.attention.head_count_kv": 2, "llama.rope.dimension_count": 16,
				"llama.vocab_size": uint32(BuiltinVocabSize()), "general.alignment": 32,
			}
			for k, want := range u32 {
				if got, ok := f.Uint32(k); !ok || got != want {
					t.Errorf("%s = %d, %v; want %d", k, got, ok, want)
				}
			}
			wantFT := map[string]uint32{"f16": 1, "q8_0": 7, "q4_0": 2}[typ]
			if ft, _ := f.Uint32("general.file_type"); ft != wantFT {
				t.Errorf("file_type %d, want %d", ft, wantFT)
			}
			if a, _ := f.String("general.architecture"); a != "llama" {
				t.Errorf("architecture %q", a)
			}
			if fb, _ := f.Float32("llama.rope.freq_base"); fb != 1e6 {
				t.Errorf("rope freq base %g", fb)
			}
			mat := map[string]gguf.GGMLType{"f16": gguf.F16, "q8_0": gguf.Q8_0, "q4_0": gguf.Q4_0}[typ]
			want := map[string][]uint64{
				"token_embd.weight": {64, uint64(BuiltinVocabSize())}, "output_norm.weight": {64},
				"blk.1.attn_norm.weight": {64}, "blk.1.attn_q.weight": {64, 64},
				"blk.1.attn_k.weight": {64, 32}, "blk.1.attn_v.weight": {64, 32},
				"blk.1.attn_output.weight": {64, 64}, "blk.1.ffn_norm.weight": {64},
				"blk.1.ffn_gate.weight": {64, 128}, "blk.1.ffn_up.weight": {64, 128},
				"blk.1.ffn_down.weight": {128, 64},
			}
			for name, dims := range want {
				ti, ok := f.Tensor(name)
				if !ok {
					t.Errorf("missing %s", name)
					continue
				}
				wantType := mat
				if len(dims) == 1 {
					wantType = gguf.F32
				}
				if !equal(ti.Dims, dims) || ti.Type != wantType {
					t.Errorf("%s: %v %s, want %v %s", name, ti.Dims, ti.Type, dims, wantType)
				}
			}
			if _, ok := f.Tensor("output.weight"); ok {
				t.Error("output.weight present: embeddings must be tied")
			}
			if len(f.Tensors) != 2+9*2 {
				t.Errorf("%d tensors, want %d", len(f.Tensors), 2+9*2)
			}
		})
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// embeddingRMS returns the root-mean-square of each token_embd row.
func embeddingRMS(t *testing.T, path string) []float64 {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor("token_embd.weight")
	n, _ := ti.Bytes()
	raw := make([]byte, n)
	fh, _ := os.Open(path)
	defer fh.Close()
	if _, err := fh.ReadAt(raw, f.DataOffset+int64(ti.Offset)); err != nil {
		t.Fatal(err)
	}
	ne0, rows := int(ti.Dims[0]), int(ti.Dims[1])
	vals := make([]float32, ne0*rows)
	switch ti.Type {
	case gguf.Q8_0:
		gguf.DequantizeQ8_0(vals, raw)
	case gguf.Q4_0:
		gguf.DequantizeQ4_0(vals, raw)
	case gguf.F16:
		for i := range vals {
			vals[i] = gguf.Float16ToFloat32(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	}
	out := make([]float64, rows)
	for r := range out {
		var ss float64
		for _, v := range vals[r*ne0 : (r+1)*ne0] {
			ss += float64(v) * float64(v)
		}
		out[r] = math.Sqrt(ss / float64(ne0))
	}
	return out
}

// The rows come back at the intended scale through either quantizer: the
// four-bit one keeps each row's spread as well as the eight-bit one.
func TestSuppressedRowsScaled(t *testing.T) {
	for _, typ := range []string{"q8_0", "q4_0"} {
		path := write(t, Options{Shape: tiny(t), Type: typ, Seed: 3})
		rms := embeddingRMS(t, path)
		voc, _ := builtinVocab(BuiltinVocabSize())
		for i, r := range rms {
			want := embdStd
			if voc.suppress[i] {
				want *= SuppressScale
			}
			if math.Abs(r-want) > want*0.4 {
				t.Errorf("%s: token %d (suppressed %v): row rms %g, want about %g", typ, i, voc.suppress[i], r, want)
			}
		}
	}
}

func TestBuiltinVocab(t *testing.T) {
	base := builtinBase()
	if len(base.tokens) != 1024 {
		t.Errorf("built-in vocabulary has %d tokens, want 1024", len(base.tokens))
	}
	index := map[string]int{}
	for i, tok := range base.tokens {
		if _, dup := index[tok]; dup {
			t.Fatalf("duplicate token %q", tok)
		}
		index[tok] = i
	}
	for i, m := range base.merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok || a == "" || b == "" {
			t.Fatalf("merge %d %q is not two symbols", i, m)
		}
		for _, part := range []string{a, b, a + b} {
			if _, ok := index[part]; !ok {
				t.Fatalf("merge %q: %q is not a token", m, part)
			}
		}
	}
	for _, w := range []string{" the", " and", " return", " func", " function", "\n\n", " :="} {
		if _, ok := index[encodeBytes(w)]; !ok {
			t.Errorf("common pre-token %q is not a single token", w)
		}
	}
	words := 0
	for _, tok := range base.tokens[256 : 1024-len(specialTokens)] {
		if isWordish(tok) && len(tok) >= 4 {
			words++
		}
	}
	if words < 200 {
		t.Errorf("only %d merged tokens are words of 3+ letters", words)
	}

	voc, err := builtinVocab(2000)
	if err != nil {
		t.Fatal(err)
	}
	if voc.size != 2000 || len(voc.suppress) != 2000 {
		t.Fatalf("padded size %d", voc.size)
	}
	for i, s := range voc.suppress {
		var want bool
		switch {
		case i < 256:
			want = i >= 0x80 || (i < 0x20 && i != '\t' && i != '\n') || i == 0x7f
		case i < 1024-len(specialTokens):
			want = false
		default:
			want = true // special tokens and padding
		}
		if s != want {
			t.Errorf("token %d %q: suppressed %v, want %v", i, base.tokensAt(i), s, want)
		}
	}
	if _, err := builtinVocab(100); err == nil {
		t.Error("vocabulary smaller than the built-in one accepted")
	}
}

func (b builtinVocabData) tokensAt(i int) string {
	if i < len(b.tokens) {
		return b.tokens[i]
	}
	return "[PAD]"
}

func TestBuiltinVocabMetadata(t *testing.T) {
	path := write(t, Options{Shape: Shape{Name: "pad", Embd: 64, Layers: 1, Heads: 2, KVHeads: 1, FFN: 64, Ctx: 256, Vocab: 1100}, Seed: 1})
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := f.Strings("tokenizer.ggml.tokens")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	if len(toks) != 1100 || len(types) != 1100 || toks[1099] != "[PAD1099]" || types[1099] != tokUnused {
		t.Fatalf("padding: %d tokens, last %q type %d", len(toks), toks[len(toks)-1], types[len(types)-1])
	}
	id := func(key string) string {
		v, ok := f.Uint32(key)
		if !ok {
			t.Fatalf("missing %s", key)
		}
		if types[v] != tokControl {
			t.Errorf("%s -> %q is not a control token", key, toks[v])
		}
		return toks[v]
	}
	wantIDs := map[string]string{
		"tokenizer.ggml.eos_token_id": "<|im_end|>", "tokenizer.ggml.bos_token_id": "<|endoftext|>",
		"tokenizer.ggml.padding_token_id": "<|endoftext|>", "tokenizer.ggml.fim_pre_token_id": "<|fim_prefix|>",
		"tokenizer.ggml.fim_suf_token_id": "<|fim_suffix|>", "tokenizer.ggml.fim_mid_token_id": "<|fim_middle|>",
		"tokenizer.ggml.fim_pad_token_id": "<|fim_pad|>", "tokenizer.ggml.fim_rep_token_id": "<|repo_name|>",
		"tokenizer.ggml.fim_sep_token_id": "<|file_sep|>",
	}
	for k, want := range wantIDs {
		if got := id(k); got != want {
			t.Errorf("%s -> %q, want %q", k, got, want)
		}
	}
	if m, _ := f.String("tokenizer.ggml.model"); m != "gpt2" {
		t.Errorf("tokenizer model %q", m)
	}
	if p, _ := f.String("tokenizer.ggml.pre"); p != "qwen2" {
		t.Errorf("pre-tokenizer %q", p)
	}
	if b, ok := f.Bool("tokenizer.ggml.add_bos_token"); !ok || b {
		t.Error("add_bos_token must be false")
	}
	if tmpl, _ := f.String("tokenizer.chat_template"); tmpl != ChatTemplate || !strings.Contains(tmpl, "<|im_start|>") {
		t.Errorf("chat template %q", tmpl)
	}
}

func TestWriteErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	cases := map[string]Options{
		"type":       {Shape: tiny(t), Type: "q4_k"},
		"shape":      {Shape: Shape{Name: "bad", Embd: 40, Layers: 1, Heads: 4, KVHeads: 2, FFN: 64, Ctx: 8}},
		"vocab file": {Shape: tiny(t), VocabFile: filepath.Join(dir, "missing.gguf")},
	}
	notVocab := filepath.Join(dir, "not-vocab.gguf")
	w := gguf.NewWriter()
	w.Set("general.name", "x")
	if err := w.WriteFile(notVocab); err != nil {
		t.Fatal(err)
	}
	cases["no tokens"] = Options{Shape: tiny(t), VocabFile: notVocab}
	for name, o := range cases {
		err := Write(path, o)
		if err == nil || !strings.HasPrefix(err.Error(), "synth: ") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("failed writes left %d files behind", len(entries)-1)
	}
}

func TestClassify(t *testing.T) {
	bpe := []string{encodeBytes(" the"), encodeBytes("\xe4\xb8"), encodeBytes("中"), encodeBytes("\x00"), encodeBytes("\n"), "ÿþ"}
	got := classify("gpt2", bpe, nil)
	want := []bool{false, true, false, true, false, true}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("bpe token %q: suppressed %v, want %v", bpe[i], got[i], want[i])
		}
	}
	spm := []string{"<unk>", "<0x0A>", "\u2581the", "ing", "<s>", "[PAD7]"}
	types := []int32{tokUnknown, tokByte, tokNormal, tokNormal, tokControl, tokUserDefined}
	got = classify("llama", spm, types)
	want = []bool{true, true, false, false, true, true}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("spm token %q: suppressed %v, want %v", spm[i], got[i], want[i])
		}
	}
}

func TestStreamMatchesChunks(t *testing.T) {
	// The parallel generator must produce the same bytes whatever the
	// scheduling: compare against a run on one core.
	g := gen{seed: 5, typ: gguf.F16}
	var a, b bytes.Buffer
	if err := g.stream(&a, "x", 64, 3000, 0.1, nil); err != nil {
		t.Fatal(err)
	}
	if err := g.stream(&b, "x", 64, 3000, 0.1, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) || a.Len() != 64*3000*2 {
		t.Fatalf("streams differ or have the wrong size (%d)", a.Len())
	}
	if err := g.stream(failWriter{}, "x", 64, 3000, 0.1, nil); err == nil {
		t.Fatal("write error not reported")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrShortWrite }
