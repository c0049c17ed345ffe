package cgo

import (
	"slices"
	"testing"

	"superfluid/engine"
)

var _ engine.TailState = (*Engine)(nil)

// A tail exported from a stream and appended to a sequence holding the
// stream's beginning continues as the whole stream did, on the sequence it
// came from or another; it is refused anywhere else.
func TestTailStateContinuesIdentically(t *testing.T) {
	e := openTest(t, 2)
	prompt := promptTokens(t, e, 40, "tail")
	e.Free(1)
	cold := continueFrom(t, e, 1, prompt, 0, 10)
	if err := e.Truncate(1, 40); err != nil {
		t.Fatal(err)
	}
	whole, err := e.Export(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	tail, err := e.ExportTail(1, 25, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tail) >= len(whole)/2 {
		t.Fatalf("a tail of 15 of 40 tokens takes %d bytes, the whole stream %d", len(tail), len(whole))
	}
	if got := e.SeqLen(1); got != 40 {
		t.Fatalf("exporting a tail left %d tokens of 40", got)
	}
	if err := e.Truncate(1, 25); err != nil {
		t.Fatal(err)
	}
	if err := e.CopyPrefix(1, 3, 25); err != nil {
		t.Fatal(err)
	}
	if n, err := e.ImportTail(1, tail); err != nil || n != 40 {
		t.Fatalf("import tail onto its own sequence: %d tokens, %v", n, err)
	}
	if n, err := e.ImportTail(3, tail); err != nil || n != 40 {
		t.Fatalf("import tail onto a copy of the prefix: %d tokens, %v", n, err)
	}
	for _, seq := range []int32{1, 3} {
		if err := e.Truncate(seq, 39); err != nil {
			t.Fatal(err)
		}
		if warm := continueFrom(t, e, seq, prompt, 39, 10); !slices.Equal(cold, warm) {
			t.Fatalf("sequence %d: cold %v\nwith the tail imported %v", seq, cold, warm)
		}
	}

	// Refused: onto a sequence holding more or fewer tokens than the
	// tail's start (left as it was), a tail as a whole state and the
	// reverse, a damaged tail, a tail from nowhere.
	if err := e.CopyPrefix(1, 4, 20); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ImportTail(4, tail); err == nil || e.SeqLen(4) != 20 {
		t.Fatalf("a tail from 25 onto 20 tokens: %v, %d tokens left", err, e.SeqLen(4))
	}
	if _, err := e.ImportTail(1, tail); err == nil {
		t.Fatal("a tail from 25 appended to a sequence of 40 tokens")
	}
	if _, err := e.Import(4, tail); err == nil {
		t.Fatal("a tail imported as a whole state")
	}
	if _, err := e.ImportTail(4, whole); err == nil {
		t.Fatal("a whole state imported as a tail")
	}
	if err := e.CopyPrefix(1, 4, 25); err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(tail)
	bad[len(bad)/2] ^= 0x40
	if _, err := e.ImportTail(4, bad); err == nil || e.SeqLen(4) != 25 {
		t.Fatalf("a damaged tail: %v, %d tokens left", err, e.SeqLen(4))
	}
	// Round trips through the scratch sequence, many times over (15 cells
	// each, 100 times: past the 1,024-cell pool had any stayed with
	// sequence 4 as it was cut back).
	for i := range 100 {
		if err := e.Truncate(4, 25); err != nil {
			t.Fatal(err)
		}
		if n, err := e.ImportTail(4, tail); err != nil || n != 40 {
			t.Fatalf("round %d: import tail: %d tokens, %v", i, n, err)
		}
		if _, err := e.ExportTail(4, 25, nil); err != nil {
			t.Fatalf("round %d: export tail: %v", i, err)
		}
	}
	n := e.SeqLen(1)
	for _, from := range []int{0, n, n + 1, -1} {
		if _, err := e.ExportTail(1, from, nil); err == nil {
			t.Errorf("a tail from %d of %d tokens exported", from, n)
		}
	}
}

// Sliding-window and recurrent models keep partial state that a tail
// cannot carry: the engine refuses to take their streams apart.
func TestTailStateRefusedWherePartialStateIsKept(t *testing.T) {
	for _, arch := range []string{"gemma4", "qwen35"} {
		t.Run(arch, func(t *testing.T) {
			e, err := Open(Options{ModelPath: archModel(t, arch), Ctx: 512, Lanes: 1, Seqs: 2, Threads: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			prompt := promptTokens(t, e, 20, "window")
			continueFrom(t, e, 0, prompt, 0, 2)
			if _, err := e.ExportTail(0, 10, nil); err == nil {
				t.Fatal("a tail of a model with partial state exported")
			}
		})
	}
}
