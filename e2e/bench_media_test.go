package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"superfluid/app"
	"superfluid/synth"
)

// llamaServerBin is llama-server built from the same llama.cpp tree.
const llamaServerBin = "/work/llama-build/bin/llama-server"

// BenchmarkImagePrefill: a cold image prompt's prefill rate (prompt tokens,
// the image's rows among them, per second of a /completion with
// n_predict 1) on the bench model with a synthetic projector, beside
// llama-server --mmproj on the same files, same threads, one slot. Each
// round sends both servers the same new image (nothing of it cached).
// Medians of rounds; the ratio is reported, not asserted.
func BenchmarkImagePrefill(b *testing.B) {
	model := benchModel(b)
	shape, err := synth.ShapeByName("0.5b")
	if err != nil {
		b.Fatal(err)
	}
	proj := filepath.Join(b.TempDir(), "bench.mmproj.gguf")
	if err := synth.WriteMMProj(proj, synth.MMProjOptions{Shape: shape, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	ours, err := app.Start("127.0.0.1:0", app.Options{ModelPath: model, Alias: "bench", MMProj: proj, Lanes: 1, Ctx: 4096, Threads: benchThreads})
	if err != nil {
		b.Fatal(err)
	}
	defer ours.Close()
	theirs := startLlamaServer(b, model, proj)
	const rounds = 5
	var ourRate, theirRate []float64
	for i := range b.N * rounds {
		img := pngOf(b, 320, 240, uint8(17*i+5))
		ourRate = append(ourRate, imagePrefillRate(b, ours.URL(), img, "tokens_evaluated"))
		theirRate = append(theirRate, imagePrefillRate(b, theirs, img, ""))
	}
	slices.Sort(ourRate)
	slices.Sort(theirRate)
	o, t := ourRate[len(ourRate)/2], theirRate[len(theirRate)/2]
	b.ReportMetric(o, "image-prefill-tok/s")
	b.ReportMetric(t, "llama-server-tok/s")
	b.ReportMetric(o/t, "vs-llama-server-x")
}

// imagePrefillRate sends one image prompt and returns prompt tokens per
// second of the request; promptField names our count ("" reads
// llama-server's timings).
func imagePrefillRate(b *testing.B, base, img, promptField string) float64 {
	body, _ := json.Marshal(map[string]any{"prompt": map[string]any{"prompt_string": "<__media__>\nDescribe this picture in detail, please.", "multimodal_data": []string{img}},
		"n_predict": 1, "temperature": 0})
	start := time.Now()
	resp, err := http.Post(base+"/completion", "application/json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		TokensEvaluated int `json:"tokens_evaluated"`
		Timings         struct {
			PromptN int `json:"prompt_n"`
			CacheN  int `json:"cache_n"`
		} `json:"timings"`
	}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != 200 {
		b.Fatalf("%s: status %d, %v: %.300s", base, resp.StatusCode, err, raw)
	}
	secs := time.Since(start).Seconds()
	n := out.Timings.PromptN + out.Timings.CacheN
	if promptField != "" {
		n = out.TokensEvaluated
	}
	if n < synth.MMProjImageTokens {
		b.Fatalf("%s: %d prompt tokens for an image of %d rows", base, n, synth.MMProjImageTokens)
	}
	return float64(n) / secs
}

// startLlamaServer runs llama-server on a free port until the benchmark
// ends, or skips when the binary is not built.
func startLlamaServer(b *testing.B, model, proj string) string {
	if _, err := os.Stat(llamaServerBin); err != nil {
		b.Skipf("%s not built: %v", llamaServerBin, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(llamaServerBin, "-m", model, "--mmproj", proj, "-t", strconv.Itoa(benchThreads), "-c", "4096", "-np", "1",
		"--host", "127.0.0.1", "--port", strconv.Itoa(port), "--no-webui")
	// llama-server draws a random marker unless told one (its /props
	// says which): ours.
	cmd.Env = append(os.Environ(), "LLAMA_MEDIA_MARKER=<__media__>")
	logPath := filepath.Join(b.TempDir(), "llama-server.log")
	if p := os.Getenv("SF_BENCH_KEEP_LOG"); p != "" {
		logPath = p
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}

	b.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := http.Get(base + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return base
			}
		}
		if time.Now().After(deadline) {
			b.Fatal("llama-server did not become healthy")
		}
		time.Sleep(200 * time.Millisecond)
	}
}
