package sched

import (
	"strconv"
	"sync"
	"time"

	"superfluid/metric"
)

// The names other servers' dashboards and gateways already read, from the
// scheduler's counters.
//
// llama-server's (tools/server, its /metrics), with their meaning there:
// prompt tokens are those prefilled (cached ones excluded), prompt seconds
// the time of the steps that carried them, predicted tokens those
// generated, predicted seconds each request's generation after its first
// token, n_decode the llama_decode calls, n_busy_slots_per_decode the lanes
// busy in them on average; the two throughput gauges are over what happened
// since the previous scrape, as llama-server resets its buckets on each.
var (
	llamaPromptTokensTotal   = metric.Counter("llamacpp:prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens.")
	llamaPromptSecondsTotal  = metric.Counter("llamacpp:prompt_seconds_total", "Total time spent processing prompts.")
	llamaPredictedTotal      = metric.Counter("llamacpp:tokens_predicted_total", "Number of generation tokens processed.")
	llamaPredictedSecondsTot = metric.Counter("llamacpp:tokens_predicted_seconds_total", "Total time spent generating tokens.")
	llamaDecodeTotal         = metric.Counter("llamacpp:n_decode_total", "Total number of llama_decode() calls.")
	llamaBusySlotsPerDecode  = metric.Gauge("llamacpp:n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call.")
	llamaPromptTokensSeconds = metric.Gauge("llamacpp:prompt_tokens_seconds", "Average prompt throughput in tokens/s since the last scrape.")
	llamaPredictedTokensSecs = metric.Gauge("llamacpp:predicted_tokens_seconds", "Average generation throughput in tokens/s since the last scrape.")
	llamaRequestsProcessing  = metric.Gauge("llamacpp:requests_processing", "Number of requests processing.")
	llamaRequestsDeferred    = metric.Gauge("llamacpp:requests_deferred", "Number of requests deferred.")
	llamaKVCacheUsageRatio   = metric.Gauge("llamacpp:kv_cache_usage_ratio", "KV-cache usage. 1 means 100 percent usage.")
	llamaKVCacheTokens       = metric.Gauge("llamacpp:kv_cache_tokens", "KV-cache tokens.")
)

// The Gateway API Inference Extension's model-server protocol, under the
// names its endpoint picker scrapes by default (vLLM's): queued and
// running requests, KV-cache utilisation as a fraction, and the LoRA
// adapters (none: superfluid serves no adapters, so the lists are empty
// and the value is the scrape's time, as the protocol wants the latest).
var (
	gwQueued     = metric.Gauge("vllm:num_requests_waiting", "Requests waiting for a lane (model-server protocol: TotalQueuedRequests).", "model_name")
	gwRunning    = metric.Gauge("vllm:num_requests_running", "Requests running on a lane (model-server protocol: TotalRunningRequests).", "model_name")
	gwKVUsage    = metric.Gauge("vllm:kv_cache_usage_perc", "KV-cache usage, 1 meaning all of it (model-server protocol: KVCacheUtilization).", "model_name")
	gwLoRAInfo   = metric.Gauge("vllm:lora_requests_info", "LoRA adapters running and waiting (none are served); the value is when this was read, in seconds since the epoch.", "max_lora", "running_lora_adapters", "waiting_lora_adapters")
	gwCacheBlock = metric.Gauge("vllm:cache_config_info", "The KV cache's shape for the gateway's prefix-aware scorer: one token per block, as many blocks as context cells.", "block_size", "num_gpu_blocks")
)

// AddLlamaCppTo adds llama-server's metric names for this snapshot; rates
// holds the previous scrape's counts for the since-last-scrape gauges.
func (s Snapshot) AddLlamaCppTo(p *metric.Page, rates *ScrapeRates) {
	p.Add(llamaPromptTokensTotal, float64(s.PrefillTokens))
	p.Add(llamaPromptSecondsTotal, float64(s.PromptNS)/1e9)
	p.Add(llamaPredictedTotal, float64(s.DecodeTokens))
	p.Add(llamaPredictedSecondsTot, float64(s.PredictNS)/1e9)
	p.Add(llamaDecodeTotal, float64(s.DecodeCalls))
	p.Add(llamaBusySlotsPerDecode, float64(s.BusySlots)/float64(max(s.DecodeCalls, 1)))
	prompt, predicted := rates.since(s)
	p.Add(llamaPromptTokensSeconds, prompt)
	p.Add(llamaPredictedTokensSecs, predicted)
	p.Add(llamaRequestsProcessing, float64(s.LanesActive))
	p.Add(llamaRequestsDeferred, float64(s.QueuedTotal()))
	p.Add(llamaKVCacheUsageRatio, s.KVUtilisation())
	p.Add(llamaKVCacheTokens, float64(s.KVTokens))
}

// AddGatewayTo adds the model-server protocol's gauges of one model.
func (s Snapshot) AddGatewayTo(p *metric.Page, model string) {
	p.Add(gwQueued, float64(s.QueuedTotal()), model)
	p.Add(gwRunning, float64(s.LanesActive), model)
	p.Add(gwKVUsage, s.KVUtilisation(), model)
}

// AddGatewayServerTo adds the protocol's once-a-server gauges: the LoRA
// adapters (none) and the cache's shape (of the largest context served).
func AddGatewayServerTo(p *metric.Page, kvCapacity int64, now time.Time) {
	p.Add(gwLoRAInfo, float64(now.UnixNano())/1e9, "0", "", "")
	if kvCapacity > 0 {
		p.Add(gwCacheBlock, 1, "1", strconv.FormatInt(kvCapacity, 10))
	}
}

// ScrapeRates keeps what the previous scrape read of one scheduler, for
// llama-server's throughput gauges, which cover the time since it. The
// zero value is ready; safe for concurrent scrapes (the second of two at
// once sees the interval between them).
type ScrapeRates struct {
	mu                         sync.Mutex
	promptTokens, promptNS     uint64
	predictSteps, predictNSOld uint64
}

// since returns the prompt and generation throughput, in tokens per
// second, between the previous scrape and s, and remembers s.
func (r *ScrapeRates) since(s Snapshot) (prompt, predicted float64) {
	if r == nil {
		return 0, 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if dt := s.PromptNS - min(r.promptNS, s.PromptNS); dt > 0 {
		prompt = float64(s.PrefillTokens-min(r.promptTokens, s.PrefillTokens)) / (float64(dt) / 1e9)
	}
	if dt := s.PredictNS - min(r.predictNSOld, s.PredictNS); dt > 0 {
		predicted = float64(s.PredictSteps-min(r.predictSteps, s.PredictSteps)) / (float64(dt) / 1e9)
	}
	r.promptTokens, r.promptNS = s.PrefillTokens, s.PromptNS
	r.predictSteps, r.predictNSOld = s.PredictSteps, s.PredictNS
	return prompt, predicted
}
