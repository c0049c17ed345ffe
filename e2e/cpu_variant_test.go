package e2e

import (
	"bytes"
	"debug/elf"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The CPU backend builds one binary carries (the default make links
// x86-64-v2, v3 and v4), chosen at start-up from CPUID or by SUPERFLUID_CPU.
// The expected choice is read independently of the binary, from the flags
// /proc/cpuinfo lists.

// cpuLevels are the flags (as /proc/cpuinfo spells them) each build needs,
// best first: the x86-64 levels as GCC's __builtin_cpu_supports reads them,
// and for v4 the VNNI and BF16 it is compiled with (native/cpu_variant.cpp).
var cpuLevels = []struct {
	name  string
	flags []string
}{
	{"v4", []string{"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16"}},
	{"v3", []string{"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe"}},
	{"v2", []string{"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"}},
}

// cpuSupports reports which of the levels this machine's CPU has.
func cpuSupports(t *testing.T) map[string]bool {
	t.Helper()
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skipf("no /proc/cpuinfo to check the CPU's levels against: %v", err)
	}
	var have []string
	for _, line := range strings.Split(string(info), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			have = strings.Fields(v)
			break
		}
	}
	got := map[string]bool{}
	for _, l := range cpuLevels {
		ok := true
		for _, f := range l.flags {
			ok = ok && slices.Contains(have, f)
		}
		got[l.name] = ok
	}
	return got
}

// cpuVariantLine runs `superfluid version` under env and returns its "cpu
// variant:" line, e.g. "v3 (of v4 v3 v2; cpuid)".
func cpuVariantLine(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.Command(superfluidBinary(t), "version")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("version: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "cpu variant: "); ok {
			return v
		}
	}
	t.Fatalf("version printed no cpu variant line:\n%s", out)
	return ""
}

// The binary runs the best build the CPU supports, or the one
// SUPERFLUID_CPU names when the CPU has it; every build it can run
// generates the same greedy text (up to near-ties, see tieNats).
func TestCPUVariantChosenAtStartUp(t *testing.T) {
	line := cpuVariantLine(t, "SUPERFLUID_CPU=")
	if line == "single build" {
		// The Go module's route: one build, and the variable is said to do
		// nothing rather than ignored in silence.
		p := startServe(t, []string{"SUPERFLUID_CPU=v3"}, "--model", tinyModel(t), "--port", "0", "--threads", "1", "--park-dir", "off")
		if !strings.Contains(p.stderr.String(), "SUPERFLUID_CPU has no effect") {
			t.Errorf("a one-build binary under SUPERFLUID_CPU=v3 logged no warning:\n%s", p.stderr)
		}
		t.Skip("this binary has one CPU backend build (the Go module's llama.cpp); the default make links several")
	}
	chosen, rest, _ := strings.Cut(line, " ")
	list, _, _ := strings.Cut(strings.TrimPrefix(rest, "(of "), ";")
	built := strings.Fields(list)
	if !slices.Equal(built, []string{"v4", "v3", "v2"}) {
		t.Errorf("builds %v, want v4 v3 v2 (best first)", built)
	}
	supports := cpuSupports(t)
	best := ""
	for _, l := range cpuLevels {
		if supports[l.name] && slices.Contains(built, l.name) {
			best = l.name
			break
		}
	}
	if best == "" {
		t.Fatalf("this CPU supports none of the builds %v (flags %v)", built, supports)
	}
	if chosen != best || !strings.HasSuffix(line, "; cpuid)") {
		t.Errorf("by CPUID: %q, want %s (cpuinfo: %v)", line, best, supports)
	}
	t.Logf("by CPUID: %s", line)

	var runnable []string
	for _, v := range built {
		got := cpuVariantLine(t, "SUPERFLUID_CPU="+v)
		if supports[v] {
			runnable = append(runnable, v)
			if want := v + " (of v4 v3 v2; SUPERFLUID_CPU=" + v + ")"; got != want {
				t.Errorf("SUPERFLUID_CPU=%s: %q, want %q", v, got, want)
			}
		} else if !strings.HasPrefix(got, best+" ") || !strings.Contains(got, "is not supported by this CPU") {
			t.Errorf("SUPERFLUID_CPU=%s on a CPU without it: %q, want %s and the reason", v, got, best)
		}
	}
	if got := cpuVariantLine(t, "SUPERFLUID_CPU=v9"); !strings.HasPrefix(got, best+" ") || !strings.Contains(got, "names no build here") {
		t.Errorf("SUPERFLUID_CPU=v9: %q, want %s and the reason", got, best)
	}
	if len(runnable) < 2 {
		t.Fatalf("this CPU runs only %v of the builds: nothing to compare", runnable)
	}

	// The same greedy completion from each build the CPU runs, each in
	// its own process, which logs the build it chose.
	body := []byte(`{"prompt":"the quick brown fox jumps over","max_tokens":48,"temperature":0,"logprobs":5}`)
	answers := map[string][]byte{}
	for _, v := range runnable {
		p := startServe(t, []string{"SUPERFLUID_CPU=" + v}, "--model", tinyModel(t), "--port", "0", "--threads", "2", "--park-dir", "off")
		if log := p.stderr.String(); !strings.Contains(log, `variant="`+v+" (of v4 v3 v2; SUPERFLUID_CPU="+v+`)"`) {
			t.Errorf("SUPERFLUID_CPU=%s: the start-up log does not name the build:\n%s", v, log)
		}
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Post(p.url+"/v1/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s %v", v, resp.StatusCode, answer, err)
		}
		answers[v] = answer
		p.cmd.Process.Kill()
		<-p.exited
	}
	ref := runnable[0]
	refText, _, _ := answerTokens(t, answers[ref])
	t.Logf("%s: %q", ref, refText)
	for _, v := range runnable[1:] {
		tied, bad := sameGreedyAnswer(t, answers[v], answers[ref])
		if bad != "" {
			t.Errorf("%s against %s: %s", v, ref, bad)
		} else if tied {
			t.Logf("%s took a near-tie the other way from %s", v, ref)
		}
	}
}

// Each CPU build's instructions stay in its own functions: the linked
// binary's v2 functions use no AVX registers, its v3 functions no AVX-512
// ones, and the code every build shares (libllama, ggml-base, native/) is
// compiled for the lowest level. A weak or COMDAT symbol that kept its name
// across builds would let the linker keep one build's body for all of them
// (build/rename-syms.sh), and an AVX-512 body would then run on any CPU;
// this reads the binary itself to show that did not happen.
func TestCPUVariantsKeepTheirInstructionsApart(t *testing.T) {
	if line := cpuVariantLine(t, "SUPERFLUID_CPU="); line == "single build" {
		t.Skip("this binary has one CPU backend build (the Go module's llama.cpp); the default make links several")
	}
	bin := superfluidBinary(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	syms, err := f.Symbols()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The global and weak functions, by address: which build each is of
	// ("v2", "v3", "v4"), or "shared" for ours, llama.cpp's and ggml-base's.
	// Local functions keep their names in every build, and Go's and libc's
	// own choose their instructions from CPUID at run time: neither is
	// judged.
	owner := map[uint64]string{}
	for _, s := range syms {
		bind := elf.ST_BIND(s.Info)
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || (bind != elf.STB_GLOBAL && bind != elf.STB_WEAK) || s.Size == 0 {
			continue
		}
		switch {
		case strings.HasPrefix(s.Name, "sf_cpu_v2_"), strings.HasPrefix(s.Name, "sf_cpu_v3_"), strings.HasPrefix(s.Name, "sf_cpu_v4_"):
			owner[s.Value] = s.Name[len("sf_cpu_") : len("sf_cpu_")+2]
		case strings.Contains(s.Name, "."):
			// Go
		case strings.Contains(s.Name, "ggml"), strings.Contains(s.Name, "gguf"), strings.Contains(s.Name, "llama"),
			strings.HasPrefix(s.Name, "sf_"), strings.HasPrefix(s.Name, "_Z") && strings.Contains(s.Name, "sf_"):
			owner[s.Value] = "shared"
		}
	}
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", bin).Output()
	if err != nil {
		t.Skipf("objdump (binutils, which the upstream build's objcopy comes with): %v", err)
	}
	type tally struct{ funcs, ymm, zmm int }
	counts := map[string]*tally{"v2": {}, "v3": {}, "v4": {}, "shared": {}}
	var offenders []string
	cur, curName := "", ""
	flag := func(why string) {
		if len(offenders) < 20 {
			offenders = append(offenders, curName+": "+why)
		}
	}
	for _, line := range strings.Split(string(out), "\n") {
		// A function starts "0000000000abc123 <name>:".
		if addr, rest, ok := strings.Cut(line, " <"); ok && strings.HasSuffix(rest, ">:") {
			a, err := strconv.ParseUint(addr, 16, 64)
			cur, curName = "", strings.TrimSuffix(rest, ">:")
			if err == nil {
				cur = owner[a]
			}
			if cur != "" {
				counts[cur].funcs++
			}
			continue
		}
		if cur == "" {
			continue
		}
		ymm, zmm := strings.Contains(line, "%ymm"), strings.Contains(line, "%zmm")
		c := counts[cur]
		if ymm {
			c.ymm++
		}
		if zmm {
			c.zmm++
		}
		switch {
		case (cur == "v2" || cur == "shared") && (ymm || zmm):
			flag(cur + " function uses AVX registers: " + strings.TrimSpace(line))
		case cur == "v3" && zmm:
			flag("v3 function uses AVX-512 registers: " + strings.TrimSpace(line))
		}
	}
	for _, o := range offenders {
		t.Error(o)
	}
	for name, c := range counts {
		t.Logf("%s: %d functions, %d instructions on ymm, %d on zmm", name, c.funcs, c.ymm, c.zmm)
		if c.funcs < 50 {
			t.Errorf("%s: only %d functions found; the symbol table is not what this test expects", name, c.funcs)
		}
	}
	if counts["v3"].ymm == 0 || counts["v4"].zmm == 0 {
		t.Errorf("v3 uses ymm %d times and v4 zmm %d times: a build is not compiled for its level", counts["v3"].ymm, counts["v4"].zmm)
	}
}
