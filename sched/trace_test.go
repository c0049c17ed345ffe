package sched

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"superfluid/engine"
	"superfluid/engine/enginetest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the scripts")

// TestTraces runs the scripts in testdata/*.txt and compares what the
// scheduler did, tick by tick, with testdata/*.golden (go test -update
// rewrites them). A script is one command a line:
//
//	engine lanes=N batch=N [seqs=N] [kv=N] [eog=N] [cost=cpu|fast|deep]
//	config [prefill=N] [starve=N] [caps=SPEC] [divisor=N]
//	submit NAME class=C prompt=N[@SEED] max=N [prefix=NAME] [deadline=DUR] [stop=T] [whole]
//	step [N]     run N loop steps (default 1)
//	run          step until nothing runs or waits
//	cancel NAME
//	advance DUR  move virtual time
//
// The output echoes each command, then each engine tick (its plan and what
// it produced), which lane a request was admitted on, and how requests
// ended: reviewable scheduling behaviour, and a diff when it changes.
func TestTraces(t *testing.T) {
	scripts, _ := filepath.Glob("testdata/*.txt")
	if len(scripts) == 0 {
		t.Fatal("no scripts in testdata")
	}
	for _, script := range scripts {
		t.Run(strings.TrimSuffix(filepath.Base(script), ".txt"), func(t *testing.T) {
			got := runScript(t, script)
			golden := strings.TrimSuffix(script, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("trace differs from %s (go test -update rewrites it):\n%s", golden, lineDiff(string(want), got))
			}
		})
	}
}

type scriptRun struct {
	t        *testing.T
	out      *strings.Builder
	h        *harness
	cfg      Config
	lanes    int
	batch    int
	seqs     int
	kv       int
	eog      uint64
	fast     bool
	deep     bool // deepCost: prompt tokens dearer with depth
	reqs     map[string]Request
	seen     map[uint32]bool
	reported map[string]bool
}

func runScript(t *testing.T, path string) string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &scriptRun{t: t, out: &strings.Builder{}, lanes: 2, batch: 512, reqs: map[string]Request{},
		seen: map[uint32]bool{}, reported: map[string]bool{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			if line != "" {
				fmt.Fprintln(r.out, line)
			}
			continue
		}
		fmt.Fprintf(r.out, "> %s\n", line)
		if err := r.do(strings.Fields(line)); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
	}
	return r.out.String()
}

func (r *scriptRun) harness() *harness {
	if r.h == nil {
		clock := newFakeClock()
		seqs := r.seqs
		if seqs == 0 {
			seqs = 4*r.lanes + 4
		}
		eng := enginetest.New(r.lanes, r.batch, seqs, 1<<20, clock)
		eng.KVCap, eng.EOGEvery = r.kv, r.eog
		eng.Trace = r.out
		eng.TraceNow = clock.since
		r.h = newHarnessOn(r.t, eng, clock, r.cfg)
		if r.fast {
			r.h.fast()
		}
		if r.deep {
			eng.Cost = deepCost
		}
	}
	return r.h
}

func (r *scriptRun) do(f []string) error {
	args := map[string]string{}
	for _, kv := range f[1:] {
		if k, v, ok := strings.Cut(kv, "="); ok {
			args[k] = v
		}
	}
	num := func(k string, def int) int {
		if v, ok := args[k]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				r.t.Fatalf("%s=%q: %v", k, v, err)
			}
			return n
		}
		return def
	}
	switch f[0] {
	case "engine":
		r.lanes, r.batch, r.seqs, r.kv = num("lanes", 2), num("batch", 512), num("seqs", 0), num("kv", 0)
		r.eog = uint64(num("eog", 0))
		r.fast = args["cost"] == "fast"
		r.deep = args["cost"] == "deep"
	case "config":
		r.cfg.PrefillBudget = num("prefill", 0)
		r.cfg.StarvationSteps = num("starve", 0)
		r.cfg.BackgroundDivisor = num("divisor", 0)
		if spec, ok := args["caps"]; ok {
			caps, err := ParseClassLanes(spec, r.lanes)
			if err != nil {
				return err
			}
			r.cfg.ClassLanes = caps
		}
	case "submit":
		return r.submit(f[1], f[2:], args, num)
	case "step":
		n := 1
		if len(f) > 1 {
			n, _ = strconv.Atoi(f[1])
		}
		for range n {
			r.harness().step()
			r.report()
		}
	case "run":
		for range 10000 {
			busy := r.harness().step()
			r.report()
			if !busy {
				return nil
			}
		}
		return fmt.Errorf("still busy")
	case "cancel":
		r.harness().jobs[f[1]].stream.Cancel()
	case "advance":
		d, err := time.ParseDuration(f[1])
		if err != nil {
			return err
		}
		r.harness().clock.Advance(d)
	default:
		return fmt.Errorf("unknown command %q", f[0])
	}
	return nil
}

func (r *scriptRun) submit(name string, f []string, args map[string]string, num func(string, int) int) error {
	h := r.harness()
	class, err := ParseClass(args["class"])
	if err != nil {
		return err
	}
	n, seed := 0, len(r.reqs)+1
	if spec, ok := args["prompt"]; ok {
		ns, ss, _ := strings.Cut(spec, "@")
		n, _ = strconv.Atoi(ns)
		if ss != "" {
			seed, _ = strconv.Atoi(ss)
		}
	}
	var prompt []engine.Token
	if p, ok := args["prefix"]; ok {
		prompt = append(prompt, r.reqs[p].Prompt...)
	}
	prompt = append(prompt, promptOf(seed, n)...)
	req := Request{Prompt: prompt, Class: class, MaxTokens: num("max", 0), Whole: slices.Contains(f, "whole")}
	if d, ok := args["deadline"]; ok {
		dur, err := time.ParseDuration(d)
		if err != nil {
			return err
		}
		req.Deadline = h.clock.Now().Add(dur)
	}
	r.reqs[name] = req
	h.submit(name, req)
	return nil
}

// report names new lanes and ended requests, in a stable order.
func (r *scriptRun) report() {
	h := r.h
	for _, l := range h.loop.p.lanes {
		if r.seen[l.tag] {
			continue
		}
		r.seen[l.tag] = true
		for name, j := range h.jobs {
			if j == l.job {
				fmt.Fprintf(r.out, "  L%d runs %s (%s, %d of %d prompt tokens cached)\n", l.tag, name, j.class, l.warm, len(j.prompt))
			}
		}
	}
	var names []string
	for name := range h.jobs {
		if !r.reported[name] && h.done(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		r.reported[name] = true
		res := h.result(name)
		fmt.Fprintf(r.out, "  %s ended: %s, %d generated, %d cached, %d preemptions, queued %v, ttft %v", name,
			res.Finish, res.Generated, res.CachedTokens, res.Preemptions, res.QueueWait, res.TTFT)
		if res.Err != nil {
			fmt.Fprintf(r.out, ", err=%q", res.Err)
		}
		want := enginetest.Reference(r.reqs[name].Prompt, r.reqs[name].MaxTokens, h.eng.EOGEvery, nil, h.eng.Descriptor().Ctx)
		if res.Err == nil && res.Finish != FinishCancelled && res.Finish != FinishDeadline && !equalTokens(h.tokens(name), want) {
			fmt.Fprint(r.out, " OUTPUT DIFFERS FROM THE REFERENCE")
		}
		fmt.Fprintln(r.out)
	}
}

// lineDiff shows the first lines where want and got part.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, a, b)
		}
	}
	return ""
}
