package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"superfluid/app"
)

// The metrics the inference gateway's endpoint picker scrapes (its
// model-server protocol, under vLLM's names) and llama-server's, read
// while requests queue on a one-lane server: the queue is above zero while
// requests wait and back to zero after, one request runs while the lane is
// busy, the KV cache's use is in [0, 1], above zero while busy and zero
// when idle; llama-server's gauges say the same.
func TestGatewayMetricsMoveWhileRequestsQueue(t *testing.T) {
	st := startStack(t, app.Options{Lanes: 1, Ctx: 16384})
	base := st.URL()
	gauges := func(m map[string]float64) (waiting, running, kv float64) {
		return m[`vllm:num_requests_waiting{model_name="tiny"}`], m[`vllm:num_requests_running{model_name="tiny"}`], m[`vllm:kv_cache_usage_perc{model_name="tiny"}`]
	}
	idle := scrapeMetrics(t, base)
	if w, r, kv := gauges(idle); w != 0 || r != 0 || kv != 0 {
		t.Fatalf("idle server: waiting %v running %v kv %v", w, r, kv)
	}
	for _, name := range []string{`vllm:lora_requests_info{max_lora="0",running_lora_adapters="",waiting_lora_adapters=""}`,
		`vllm:cache_config_info{block_size="1",num_gpu_blocks="16384"}`, "llamacpp:prompt_tokens_total", "llamacpp:n_decode_total"} {
		if _, ok := idle[name]; !ok {
			t.Errorf("no %s on /metrics", name)
		}
	}

	// The lane's holder: a long stream (4000 tokens take the tiny model
	// seconds), read until it runs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := `{"model":"tiny","messages":[{"role":"user","content":"go on"}],"max_tokens":4000,"temperature":0,"stream":true}`
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for seen := 0; seen < 2 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: ") {
			seen++
		}
	}
	// Three more wait behind it.
	const queued = 3
	var wg sync.WaitGroup
	errs := make(chan error, queued)
	for i := range queued {
		wg.Go(func() {
			r, err := http.Post(base+"/v1/chat/completions", "application/json",
				strings.NewReader(fmt.Sprintf(`{"model":"tiny","messages":[{"role":"user","content":"wait %d"}],"max_tokens":16}`, i)))
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode != 200 {
				errs <- fmt.Errorf("queued request %d: %d", i, r.StatusCode)
			}
		})
	}
	pollUntil(t, 60*time.Second, func() (bool, string) {
		m := scrapeMetrics(t, base)
		w, r, kv := gauges(m)
		state := fmt.Sprintf("waiting %v running %v kv %v deferred %v processing %v", w, r, kv, m["llamacpp:requests_deferred"], m["llamacpp:requests_processing"])
		if kv < 0 || kv > 1 {
			t.Fatalf("KV utilisation outside [0, 1]: %s", state)
		}
		return w == queued && r == 1 && kv > 0 && m["llamacpp:requests_deferred"] == queued &&
			m["llamacpp:requests_processing"] == 1 && m["llamacpp:kv_cache_usage_ratio"] == kv, state
	})
	cancel() // the holder hangs up: its lane goes to the queue's head
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	pollUntil(t, 30*time.Second, func() (bool, string) {
		m := scrapeMetrics(t, base)
		w, r, kv := gauges(m)
		return w == 0 && r == 0 && kv == 0 && m["llamacpp:requests_deferred"] == 0, fmt.Sprintf("waiting %v running %v kv %v", w, r, kv)
	})
	m := scrapeMetrics(t, base)
	if m["llamacpp:n_decode_total"] == 0 || m["llamacpp:tokens_predicted_total"] < queued || m["llamacpp:prompt_seconds_total"] <= 0 ||
		m["llamacpp:n_busy_slots_per_decode"] <= 0 || m["llamacpp:n_busy_slots_per_decode"] > 1 {
		t.Errorf("llama-server counters after the run: %v", m)
	}
	for _, class := range []string{"chat"} {
		if m[`superfluid_ttft_seconds_count{class="`+class+`"}`] < queued+1 || m[`superfluid_itl_seconds_count{class="`+class+`"}`] == 0 {
			t.Errorf("per-class latency histograms for %s: ttft %v itl %v", class, m[`superfluid_ttft_seconds_count{class="`+class+`"}`], m[`superfluid_itl_seconds_count{class="`+class+`"}`])
		}
	}
}
