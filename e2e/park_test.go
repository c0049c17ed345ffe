package e2e

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"superfluid/app"
	"superfluid/gguf"
	"superfluid/park"
	"superfluid/synth"
)

// The disk tier end to end: the real engine and server, the tiny synthetic
// model, conversations over /v1/chat/completions. A turn after a restart
// must be as warm as one without it and say the same thing; a park file
// that is truncated or damaged must be refused, counted, removed and
// served cold — same output as a cold run, never an error; one of another
// model must be left alone, for that model's next start.

const parkSystem = "You are a careful assistant. You answer briefly, in plain words, " +
	"and you say so when you do not know. You keep to the question asked. " +
	"You never invent facts, names or numbers. You write short sentences. " +
	"You prefer lists when there are several items. You end with a question."

type parkReply struct {
	Content                    string
	Prompt, Cached, Completion int
}

func parkTurn1() []map[string]string {
	return []map[string]string{
		{"role": "system", "content": parkSystem},
		{"role": "user", "content": "Tell me about rivers, lakes and the sea, and how water moves between them."},
	}
}

func parkTurn2(reply1 string) []map[string]string {
	return append(parkTurn1(),
		map[string]string{"role": "assistant", "content": reply1},
		map[string]string{"role": "user", "content": "And the clouds?"})
}

// parkChat runs a greedy chat completion and returns its text and usage.
func parkChat(t testing.TB, st interface{ URL() string }, msgs []map[string]string) parkReply {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "tiny", "messages": msgs, "max_tokens": 24, "temperature": 0})
	resp, err := http.Post(st.URL()+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("chat: status %d, %v, %+v", resp.StatusCode, err, out)
	}
	return parkReply{out.Choices[0].Message.Content, out.Usage.PromptTokens, out.Usage.PromptTokensDetails.CachedTokens, out.Usage.CompletionTokens}
}

// parkFixture is what several tests compare against: turn 1, turn 2 warm
// from memory (no restart), turn 2 cold, and the park file turn 1 leaves
// when its server stops.
type parkFixture struct {
	turn1, warm2, cold2 parkReply
	file                []byte
	name                string
}

var (
	parkFixOnce sync.Once
	parkFix     parkFixture
	parkFixErr  string
)

func fixture(t *testing.T) parkFixture {
	t.Helper()
	parkFixOnce.Do(func() {
		ft := &fixtureT{TB: t}
		parkFix = buildFixture(ft)
		parkFixErr = ft.failed
	})
	if parkFixErr != "" {
		t.Fatalf("fixture: %s", parkFixErr)
	}
	return parkFix
}

// fixtureT lets the fixture's first user record a failure for every test
// that shares it.
type fixtureT struct {
	testing.TB
	failed string
}

func (f *fixtureT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	f.TB.Fatalf(format, args...)
}

func buildFixture(t testing.TB) parkFixture {
	var fx parkFixture
	// Without parking: turn 1 then turn 2 warm from memory, and turn 2
	// cold on a fresh server.
	mem := startParkStack(t, app.Options{})
	fx.turn1 = parkChat(t, mem, parkTurn1())
	fx.warm2 = parkChat(t, mem, parkTurn2(fx.turn1.Content))
	mem.Close()
	cold := startParkStack(t, app.Options{})
	fx.cold2 = parkChat(t, cold, parkTurn2(fx.turn1.Content))
	cold.Close()
	if fx.warm2.Cached == 0 || fx.cold2.Cached != 0 {
		t.Fatalf("baselines: warm %+v cold %+v", fx.warm2, fx.cold2)
	}
	// Turn 1 on a parking server, which parks it as it stops.
	dir := t.TempDir()
	st := startParkStack(t, app.Options{ParkDir: dir})
	if r := parkChat(t, st, parkTurn1()); r != fx.turn1 {
		t.Fatalf("turn 1 with parking on: %+v, without %+v", r, fx.turn1)
	}
	st.Close()
	files := parkFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("park files after stop: %v", files)
	}
	fx.name = files[0]
	fx.file, _ = os.ReadFile(filepath.Join(dir, fx.name))
	return fx
}

// parkStack is a stack the test may close itself (a restart); cleanup
// closes it if the test did not. app.Stack.Close must run once.
type parkStack struct {
	*app.Stack
	once sync.Once
	err  error
}

func (p *parkStack) Close() error {
	p.once.Do(func() { p.err = p.Stack.Close() })
	return p.err
}

func startParkStack(t testing.TB, o app.Options) *parkStack {
	t.Helper()
	if o.ModelPath == "" {
		o.ModelPath = tinyModel(t)
	}
	o.Threads, o.Alias = 1, "tiny"
	if o.Ctx == 0 {
		o.Ctx = 4096
	}
	st, err := app.Start("127.0.0.1:0", o)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	p := &parkStack{Stack: st}
	t.Cleanup(func() { p.Close() })
	return p
}

// parkFiles lists the park files under dir — in it and in its model
// subdirectories — by their paths relative to dir.
func parkFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	for _, pattern := range []string{"*.park", "*/*.park"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
	}
	return out
}

// parkDirWith makes a park directory holding data at name (relative to
// it: in a model's subdirectory, or in the directory itself as older
// builds wrote).
func parkDirWith(t *testing.T, name string, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, name)
	os.MkdirAll(filepath.Dir(path), 0o755)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestParkResumesWarmAfterRestart(t *testing.T) {
	fx := fixture(t)
	dir := parkDirWith(t, fx.name, fx.file)
	st := startParkStack(t, app.Options{ParkDir: dir})
	if n := st.Cache.ParkStats().Files.Load(); n != 1 {
		t.Fatalf("indexed %d park files", n)
	}
	r := parkChat(t, st, parkTurn2(fx.turn1.Content))
	newTokens := r.Prompt - (fx.turn1.Prompt + fx.turn1.Completion)
	t.Logf("turn 2 after a restart: %d prompt tokens, %d cached (%d without a restart), %d new", r.Prompt, r.Cached, fx.warm2.Cached, newTokens)
	if r.Prompt-r.Cached > newTokens+32 {
		t.Fatalf("prefilled %d tokens, %d of them new", r.Prompt-r.Cached, newTokens)
	}
	if r.Cached != fx.warm2.Cached {
		t.Fatalf("cached %d after a restart, %d without", r.Cached, fx.warm2.Cached)
	}
	if r.Content != fx.warm2.Content {
		t.Fatalf("after a restart: %q; without: %q", r.Content, fx.warm2.Content)
	}
	if st.Cache.Stats().ParkHits.Load() != 1 {
		t.Fatal("no restore counted")
	}
	m := parkScrape(t, st)
	if m["superfluid_park_restores_total"] != 1 || m[`superfluid_cache_entries{tier="parked"}`] < 1 || m["superfluid_park_restore_last_seconds"] <= 0 {
		t.Fatalf("metrics: restores %v, parked %v, restore time %v", m["superfluid_park_restores_total"], m[`superfluid_cache_entries{tier="parked"}`], m["superfluid_park_restore_last_seconds"])
	}
	var tiers []string
	for _, e := range st.Cache.View() {
		tiers = append(tiers, e.Tier)
	}
	if !strings.Contains(strings.Join(tiers, ","), "parked") {
		t.Fatalf("view %v", tiers)
	}
}

// otherModel is the tiny shape with other weights: another identity.
func otherModel(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tiny-seed12.gguf")
	s, _ := synth.ShapeByName("tiny")
	if err := synth.Write(path, synth.Options{Shape: s, Type: "f16", Seed: 12}); err != nil {
		t.Fatal(err)
	}
	return path
}

func parkRefused(st *parkStack) int64 {
	var n int64
	for r := range park.NumReasons {
		n += st.Cache.ParkStats().Refused[r].Load()
	}
	return n
}

// Two models share one park directory, as every server shares the
// default one: turn 1 on model A, a restart on model B and its own turn
// 1, a restart on A — A's turn 2 is as warm as without any restart and
// says the same; then B's turn 2 is warm from disk too.
func TestParkModelsShareTheDirectory(t *testing.T) {
	fx := fixture(t)
	dir := t.TempDir()
	a := startParkStack(t, app.Options{ParkDir: dir})
	if r := parkChat(t, a, parkTurn1()); r != fx.turn1 {
		t.Fatalf("A's turn 1: %+v, want %+v", r, fx.turn1)
	}
	a.Close()
	modelB := otherModel(t)
	b := startParkStack(t, app.Options{ModelPath: modelB, ParkDir: dir})
	b1 := parkChat(t, b, parkTurn1())
	if n := parkRefused(b); n != 0 {
		t.Fatalf("B refused %d files", n)
	}
	b.Close()
	files := parkFiles(t, dir)
	if len(files) != 2 || filepath.Dir(files[0]) == filepath.Dir(files[1]) || filepath.Dir(files[0]) == "." || filepath.Dir(files[1]) == "." {
		t.Fatalf("park files %v: want one in each model's subdirectory", files)
	}
	t.Logf("park files: %v", files)

	a = startParkStack(t, app.Options{ParkDir: dir})
	r := parkChat(t, a, parkTurn2(fx.turn1.Content))
	if r.Cached != fx.warm2.Cached || r.Content != fx.warm2.Content {
		t.Fatalf("A's turn 2 after B ran: %+v, without a restart %+v", r, fx.warm2)
	}
	if a.Cache.Stats().ParkHits.Load() != 1 || parkRefused(a) != 0 {
		t.Fatalf("A: %d restores, %d refusals", a.Cache.Stats().ParkHits.Load(), parkRefused(a))
	}
	a.Close()

	b = startParkStack(t, app.Options{ModelPath: modelB, ParkDir: dir})
	rb := parkChat(t, b, parkTurn2(b1.Content))
	if rb.Cached < b1.Prompt || b.Cache.Stats().ParkHits.Load() != 1 {
		t.Fatalf("B's turn 2 cached %d of %d (turn 1's prompt was %d), %d restores", rb.Cached, rb.Prompt, b1.Prompt, b.Cache.Stats().ParkHits.Load())
	}
}

// The V cache layout is part of the identity: with flash attention off (V
// transposed) a server parks beside the one with it on, in its own
// subdirectory, and neither reads the other's state.
func TestParkVLayoutIsPartOfTheIdentity(t *testing.T) {
	fx := fixture(t)
	dir := parkDirWith(t, fx.name, fx.file) // written with flash attention on
	off := startParkStack(t, app.Options{ParkDir: dir, FlashAttn: "off"})
	r := parkChat(t, off, parkTurn2(fx.turn1.Content))
	if r.Cached != 0 || off.Cache.ParkStats().Reads.Load() != 0 || parkRefused(off) != 0 {
		t.Fatalf("flash attention off: cached %d, %d park reads, %d refusals; the other layout's file must not be read", r.Cached, off.Cache.ParkStats().Reads.Load(), parkRefused(off))
	}
	off.Close()
	// Its own conversation parked under its own layout: the layout derived
	// from the settings is the one the engine exported.
	if n := off.Cache.ParkStats().WriteErrors.Load(); n != 0 || off.Cache.ParkStats().Parks.Load() != 1 {
		t.Fatalf("flash attention off: %d parks, %d write errors", off.Cache.ParkStats().Parks.Load(), n)
	}
	files := parkFiles(t, dir)
	if len(files) != 2 || !slices.ContainsFunc(files, func(f string) bool { return strings.HasSuffix(filepath.Dir(f), "-f16-vtrans") }) {
		t.Fatalf("park files %v", files)
	}
	on := startParkStack(t, app.Options{ParkDir: dir})
	if r := parkChat(t, on, parkTurn2(fx.turn1.Content)); r.Cached != fx.warm2.Cached || r.Content != fx.warm2.Content {
		t.Fatalf("flash attention on again: %+v, want %+v", r, fx.warm2)
	}
}

// A conversation an older build parked (format version 1, in the park
// directory itself) moves into the model's subdirectory at start-up — its
// V layout read from the real engine state it holds — and restores warm.
func TestParkMigratesTheFlatLayout(t *testing.T) {
	fx := fixture(t)
	old := bytes.Clone(fx.file)
	binary.LittleEndian.PutUint16(old[4:], 1)
	old[9] = 0
	hl := 128 + 4*int(binary.LittleEndian.Uint32(old[12:]))
	binary.LittleEndian.PutUint32(old[hl:], crc32.Checksum(old[:hl], crc32.MakeTable(crc32.Castagnoli)))
	dir := parkDirWith(t, filepath.Base(fx.name), old)
	st := startParkStack(t, app.Options{ParkDir: dir})
	if m := st.Cache.ParkStats().Migrated.Load(); m != 1 {
		t.Fatalf("migrated %d files", m)
	}
	if files := parkFiles(t, dir); len(files) != 1 || files[0] != fx.name {
		t.Fatalf("park files %v, want %s", files, fx.name)
	}
	if r := parkChat(t, st, parkTurn2(fx.turn1.Content)); r.Cached != fx.warm2.Cached || r.Content != fx.warm2.Content {
		t.Fatalf("after migrating: %+v, want %+v", r, fx.warm2)
	}
}

func TestParkRefusesForeignTruncatedAndDamagedFiles(t *testing.T) {
	fx := fixture(t)
	// The same conversation parked by a server on another model.
	foreignDir := t.TempDir()
	other := startParkStack(t, app.Options{ModelPath: otherModel(t), ParkDir: foreignDir})
	parkChat(t, other, parkTurn1())
	other.Close()
	foreign := parkFiles(t, foreignDir)
	if len(foreign) != 1 {
		t.Fatalf("foreign files %v", foreign)
	}
	foreignBytes, _ := os.ReadFile(filepath.Join(foreignDir, foreign[0]))

	flipped := bytes.Clone(fx.file)
	flipped[len(flipped)-len(flipped)/3] ^= 0x08
	for _, tc := range []struct {
		name, file string
		data       []byte
		reason     park.Reason
		stays      bool
	}{
		// Only a copy by hand puts another model's file in this model's
		// subdirectory: refused, and left for its owner.
		{"another model's file in this model's subdirectory", filepath.Join(filepath.Dir(fx.name), filepath.Base(foreign[0])), foreignBytes, park.ReasonModel, true},
		{"truncated", fx.name, fx.file[:len(fx.file)*2/3], park.ReasonTruncated, false},
		{"flipped payload byte", fx.name, flipped, park.ReasonPayload, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := parkDirWith(t, tc.file, tc.data)
			st := startParkStack(t, app.Options{ParkDir: dir})
			r := parkChat(t, st, parkTurn2(fx.turn1.Content))
			if r.Cached != 0 || r.Content != fx.cold2.Content {
				t.Fatalf("got %+v, want the cold run's %+v", r, fx.cold2)
			}
			if n := st.Cache.ParkStats().Refused[tc.reason].Load(); n != 1 {
				t.Fatalf("refused[%s] = %d", tc.reason, n)
			}
			if _, err := os.Stat(filepath.Join(dir, tc.file)); tc.stays != (err == nil) {
				t.Fatalf("the refused file: %v (it should stay: %v)", err, tc.stays)
			}
			if m := parkScrape(t, st); m[fmt.Sprintf(`superfluid_park_refused_total{reason=%q}`, tc.reason.String())] != 1 {
				t.Fatal("refusal missing from /metrics")
			}
		})
	}
}

// Tests run as root, so a read-only mode would not stop writes: the park
// directory is swapped for a regular file under the running server, and
// (second stack) is a regular file from the start.
func TestParkWriteFailureLeavesServingUnaffected(t *testing.T) {
	fx := fixture(t)
	dir := filepath.Join(t.TempDir(), "park")
	st := startParkStack(t, app.Options{ParkDir: dir, ParkEager: true})
	os.RemoveAll(dir)
	os.WriteFile(dir, []byte("no longer a directory"), 0o644)
	if r := parkChat(t, st, parkTurn1()); r != fx.turn1 {
		t.Fatalf("turn 1: %+v, want %+v", r, fx.turn1)
	}
	if r := parkChat(t, st, parkTurn2(fx.turn1.Content)); r != fx.warm2 {
		t.Fatalf("turn 2: %+v, want %+v", r, fx.warm2)
	}
	parkPoll(t, func() bool { return st.Cache.ParkStats().WriteErrors.Load() >= 1 })
	if err := st.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	st = startParkStack(t, app.Options{ParkDir: dir}) // a regular file: parking off
	if st.Cache.ParkInfo().Enabled {
		t.Fatal("parking on over a regular file")
	}
	if r := parkChat(t, st, parkTurn1()); r != fx.turn1 {
		t.Fatalf("turn 1 without parking: %+v", r)
	}
}

func TestParkBudgetKeepsTheDirectoryUnderIt(t *testing.T) {
	fx := fixture(t)
	dir := t.TempDir()
	budget := int64(len(fx.file)) * 5 / 2
	st := startParkStack(t, app.Options{ParkDir: dir, ParkEager: true, ParkBudget: budget})
	for i := range 5 {
		msgs := parkTurn1()
		msgs[0]["content"] = fmt.Sprintf("Conversation %d. %s", i, parkSystem)
		parkChat(t, st, msgs)
		parkPoll(t, func() bool { return st.Cache.ParkStats().Parks.Load() == int64(i+1) })
		var total int64
		for _, name := range parkFiles(t, dir) {
			info, _ := os.Stat(filepath.Join(dir, name))
			total += info.Size()
		}
		if total > budget {
			t.Fatalf("after conversation %d: %d bytes on disk, budget %d", i, total, budget)
		}
	}
	if n := st.Cache.ParkStats().Swept.Load(); n < 2 {
		t.Fatalf("swept %d files", n)
	}
}

func TestParkLossy(t *testing.T) {
	fx := fixture(t)
	if _, err := app.Start("127.0.0.1:0", app.Options{ModelPath: tinyModel(t), CacheTypeK: "q8_0", CacheTypeV: "q8_0", ParkDir: t.TempDir(), ParkLossy: true}); err == nil || !strings.Contains(err.Error(), "nothing to demote") {
		t.Fatalf("lossy parking of a q8_0 cache: %v", err)
	}
	dir := t.TempDir()
	st := startParkStack(t, app.Options{ParkDir: dir, ParkLossy: true})
	parkChat(t, st, parkTurn1())
	st.Close()
	files := parkFiles(t, dir)
	info, _ := os.Stat(filepath.Join(dir, files[0]))
	ratio := float64(info.Size()) / float64(len(fx.file))
	t.Logf("lossy park file: %d bytes, %.2f of the lossless one", info.Size(), ratio)
	if ratio > 0.75 {
		t.Fatalf("lossy file is %.2f of the lossless one", ratio)
	}
	st = startParkStack(t, app.Options{ParkDir: dir, ParkLossy: true})
	r := parkChat(t, st, parkTurn2(fx.turn1.Content))
	if r.Cached != fx.warm2.Cached {
		t.Fatalf("cached %d, want %d", r.Cached, fx.warm2.Cached)
	}
	t.Logf("lossy resume says the same as a lossless one: %v", r.Content == fx.warm2.Content)
	if !st.Cache.ParkInfo().Lossy || parkScrape(t, st)["superfluid_park_lossy"] != 1 {
		t.Fatal("lossy parking not reported")
	}
}

const parkCrashEnv = "SUPERFLUID_E2E_PARK_CRASH_DIR"

// TestParkCrashWhileParking kills (SIGKILL) a server that parks eagerly
// while it serves one conversation after another, at a random moment, then
// checks every file left under a final name verifies completely, and that
// a new server on the directory resumes the first conversation warm and
// right. (park's TestCrashMidWriteLeavesNoPartialFile stops a writer at an
// exact point inside a file; this is the same guarantee through the whole
// server.)
func TestParkCrashWhileParking(t *testing.T) {
	if dir := os.Getenv(parkCrashEnv); dir != "" {
		parkCrashChild(t, dir)
		return
	}
	fx := fixture(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestParkCrashWhileParking$", "-test.count=1")
	cmd.Env = append(os.Environ(), parkCrashEnv+"="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	parkPoll(t, func() bool { return len(parkFiles(t, dir)) >= 3 })
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if t.Failed() {
		t.Logf("child: %s", stderr.String())
	}

	digest, err := gguf.ModelDigest(tinyModel(t))
	if err != nil {
		t.Fatal(err)
	}
	s, err := park.Open(park.Config{Dir: dir, Identity: digest, KVType: "f16", VLayout: park.VRows})
	if err != nil {
		t.Fatal(err)
	}
	list := s.List()
	for _, m := range list {
		if _, err := s.Load(m.Tokens, nil); err != nil {
			t.Errorf("file %s: %v", m.Name, err)
		}
	}
	var refused int64
	for r := range park.NumReasons {
		refused += s.Stats().Refused[r].Load()
	}
	t.Logf("%d files complete, %d temporary files removed, %d refused", len(list), s.Stats().StaleTemps.Load(), refused)
	s.Close()
	if refused != 0 || len(list) < 3 {
		t.Fatalf("refused %d, indexed %d", refused, len(list))
	}
	st := startParkStack(t, app.Options{ParkDir: dir})
	if r := parkChat(t, st, parkTurn2(fx.turn1.Content)); r != fx.warm2 {
		t.Fatalf("after the crash: %+v, want %+v", r, fx.warm2)
	}
}

func parkCrashChild(t *testing.T, dir string) {
	st := startParkStack(t, app.Options{ParkDir: dir, ParkEager: true})
	parkChat(t, st, parkTurn1())
	for i := 0; ; i++ { // until killed
		msgs := parkTurn1()
		msgs[1]["content"] = fmt.Sprintf("Question %d: %s", i, msgs[1]["content"])
		parkChat(t, st, msgs)
	}
}

func parkPoll(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 20s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// parkScrape reads /metrics into "name{labels}" → value.
func parkScrape(t *testing.T, st interface{ URL() string }) map[string]float64 {
	t.Helper()
	resp, err := http.Get(st.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.LastIndexByte(line, ' '); i > 0 && line[0] != '#' {
			if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
				out[line[:i]] = v
			}
		}
	}
	return out
}

// The status views show each tier: after a restart the conversation is
// parked (/props and /api/ps say so); after its next turn it is resident.
func TestStatusViewsShowCacheTiers(t *testing.T) {
	fx := fixture(t)
	dir := parkDirWith(t, fx.name, fx.file)
	st := startParkStack(t, app.Options{ParkDir: dir})
	type tier struct{ Entries, Tokens int }
	type status struct {
		Resident, Host, Parked tier
		Park                   struct{ Enabled bool }
	}
	props := func() status {
		var out struct {
			Cache status `json:"superfluid_cache"`
		}
		getJSON(t, st.URL()+"/props", &out)
		return out.Cache
	}
	ps := func() status {
		var out struct {
			Models []struct {
				Cache status `json:"superfluid_cache"`
			} `json:"models"`
		}
		getJSON(t, st.URL()+"/api/ps", &out)
		if len(out.Models) != 1 {
			t.Fatalf("/api/ps lists %d models", len(out.Models))
		}
		return out.Models[0].Cache
	}
	for name, s := range map[string]status{"/props": props(), "/api/ps": ps()} {
		if !s.Park.Enabled || s.Parked.Entries != 1 || s.Parked.Tokens == 0 || s.Resident.Entries != 0 {
			t.Fatalf("%s after a restart: %+v", name, s)
		}
	}
	parkChat(t, st, parkTurn2(fx.turn1.Content))
	if s := props(); s.Resident.Entries < 1 || s.Resident.Tokens <= fx.turn1.Prompt {
		t.Fatalf("/props after turn 2: %+v", s)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
