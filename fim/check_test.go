package fim

import (
	"slices"
	"testing"

	"superfluid/engine"
)

// checkPrompt asserts what every Build result must satisfy, given the byte
// tokenizer: within budget, BOS first when wanted, each marker exactly once
// and in the family's order, the suffix section a start of the suffix, the
// prefix section an end of prefix+prompt, Info consistent with the layout,
// and no budget left unused while local text was cut.
func checkPrompt(t testing.TB, b *Builder, r Request, budget int, toks []engine.Token, info Info) {
	t.Helper()
	if len(toks) > budget {
		t.Fatalf("%d tokens exceed the budget of %d", len(toks), budget)
	}
	ids := b.Tokens()
	body := toks
	if b.addBOS {
		if len(toks) == 0 || toks[0] != b.bos {
			t.Fatalf("BOS %d not first: %v", b.bos, toks)
		}
		body = toks[1:]
	}
	count := func(id engine.Token) int {
		n := 0
		for _, x := range toks {
			if x == id {
				n++
			}
		}
		return n
	}
	wantMid := 0
	if b.spec.midMarker {
		wantMid = 1
	}
	if count(ids.Prefix) != 1 || count(ids.Suffix) != 1 || (ids.Middle >= 0 && count(ids.Middle) != wantMid) {
		t.Fatalf("markers pre %d× suf %d× mid %d× in %v", count(ids.Prefix), count(ids.Suffix), count(ids.Middle), toks)
	}
	iPre, iSuf := slices.Index(toks, ids.Prefix), slices.Index(toks, ids.Suffix)
	var preSeg, sufSeg []engine.Token
	first := min(iPre, iSuf)
	if b.spec.order == PSM {
		iMid := slices.Index(toks, ids.Middle)
		if !(iPre < iSuf && iSuf < iMid && iMid == len(toks)-1) {
			t.Fatalf("PSM order broken: pre %d suf %d mid %d of %d", iPre, iSuf, iMid, len(toks))
		}
		preSeg, sufSeg = toks[iPre+1:iSuf], toks[iSuf+1:iMid]
	} else {
		if !(iSuf < iPre) {
			t.Fatalf("SPM order broken: suf %d pre %d", iSuf, iPre)
		}
		preSeg, sufSeg = toks[iPre+1:], toks[iSuf+1:iPre]
	}
	bytes := func(s string) []engine.Token { x, _ := byteTok{}.Tokenize(s); return x }
	pre, suf, prm := bytes(r.Prefix), bytes(r.Suffix), bytes(r.Prompt)
	if info.Prefix+info.PrefixDropped != len(pre) || info.Suffix+info.SuffixDropped != len(suf) ||
		info.Prompt+info.PromptDropped != len(prm) || info.Extra+info.ExtraDropped != len(r.Extra) {
		t.Fatalf("info does not add up: %+v for %d/%d/%d tokens, %d chunks", info, len(pre), len(suf), len(prm), len(r.Extra))
	}
	if !slices.Equal(sufSeg, suf[:info.Suffix]) {
		t.Fatalf("suffix section %v is not the first %d of the suffix", sufSeg, info.Suffix)
	}
	var inPrefix []engine.Token
	if info.RepoLevel && b.spec.repo == repoStarCoder {
		inPrefix = bytes(orDefault(r.Filename, defaultFilename) + "\n")
	}
	want := join(inPrefix, pre[len(pre)-info.Prefix:], prm[len(prm)-info.Prompt:])
	if !slices.Equal(preSeg, want) {
		t.Fatalf("prefix section %v, want %v", preSeg, want)
	}
	if head := len(body) - len(toks) + first; head != info.ExtraTokens-len(inPrefix) {
		t.Fatalf("%d tokens before the first marker, info says %d", head, info.ExtraTokens-len(inPrefix))
	}
	if info.PrefixDropped+info.SuffixDropped+info.PromptDropped > 0 && len(toks) != budget {
		t.Fatalf("local text cut with %d of %d tokens used", len(toks), budget)
	}
}
