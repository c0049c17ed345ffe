package bench

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Scenario names a workload.
type Scenario string

// The scenarios, each measuring one figure of the design notes' bar.
const (
	// Decode: concurrent long greedy generations; decode tokens/s.
	Decode Scenario = "decode"
	// FIMUnderLoad: editor FIM requests idle, then beside long background
	// prompts; the loaded/idle latency ratio.
	FIMUnderLoad Scenario = "fim-under-load"
	// MultiTurn: conversations whose follow-up turns extend the previous
	// one; the warm/cold TTFT ratio and the cached-prompt share.
	MultiTurn Scenario = "multi-turn"
	// Diverge: a long opening cold, the same conversation edited after 85%
	// of it, then its second turn; the cached share of the edited prompt.
	Diverge Scenario = "diverge"
	// Soak: hostile mixed traffic on every API for a while; no undocumented
	// 5xx, no crash, lanes idle afterwards, resident memory flat.
	Soak Scenario = "soak"
)

// API names the protocol family the server speaks.
type API string

const (
	// OpenAI is /v1/completions, /v1/chat/completions and llama.cpp's
	// /infill and /tokenize: superfluid, llama-server, vLLM.
	OpenAI API = "openai"
	// Ollama is /api/generate and /api/chat with newline-delimited JSON.
	Ollama API = "ollama"
)

// Config is one benchmark run. Zero values take the scenario's defaults
// (see withDefaults).
type Config struct {
	URL      string   // the server's base URL; traffic goes nowhere else (but BackgroundURL)
	Scenario Scenario // decode, fim-under-load or multi-turn
	API      API      // openai (default) or ollama
	Model    string   // model name to send; empty: the server's first listed model
	APIKey   string   // sent as Authorization: Bearer

	// BackgroundURL is where fim-under-load sends its background load
	// (empty: URL): FIM to one server, the load to another, as when an
	// editor's FIM model and a larger model run as two processes.
	BackgroundURL string
	// BackgroundModel is the model name the background load sends (empty:
	// Model on the same server, else the background server's first listed).
	BackgroundModel string

	// Concurrency is streams at once (decode), background requests (FIM)
	// or conversations at once (multi-turn).
	Concurrency int
	// Requests is generations in total (decode), FIM requests per phase
	// (fim-under-load) or conversations in total (multi-turn).
	Requests int
	// Turns is the turns of each conversation (multi-turn), the first cold.
	Turns int
	// MaxTokens is each measured request's generation limit (n_predict for FIM).
	MaxTokens int
	// PromptTokens is the decode prompt, each background prompt, or each
	// conversation's opening system prompt, in tokens (approximately).
	PromptTokens int
	// FIMPromptTokens is the size of a FIM request: prefix, suffix and extra context.
	FIMPromptTokens int
	// Duration stops starting new work after this long (0: no bound); work
	// already started runs to its end.
	Duration time.Duration
	// Timeout bounds each request.
	Timeout time.Duration
	// Seed selects the prompt text.
	Seed uint64
	// FIMStream asks for FIM responses as a stream, which gives their TTFT;
	// false sends exactly what editors send (stream: false).
	FIMStream bool
	// FIMIgnoreEOS has each measured FIM request generate all MaxTokens
	// (ignore_eos), so that servers whose FIM sampler ends early on a
	// random-weight model (llama-server's infill sampler) do the same work.
	// Editors do not send it.
	FIMIgnoreEOS bool
	// ReferenceTPS is the raw engine's decode tokens/s for this stream count
	// (llama-bench); decode reports its ratio to it when set.
	ReferenceTPS float64
	// ColdTTFT is a cold turn-1 TTFT from an earlier multi-turn run with the
	// same seed; turn 1 of this run (after a server restart) is compared with it.
	ColdTTFT time.Duration
	// Settle is how long the FIM scenario waits for background requests
	// that have been sent but not yet answered before it measures.
	Settle time.Duration
	// IdleWait is how long the soak waits, once its traffic stops, for
	// the server's lanes to go idle (default 30 s).
	IdleWait time.Duration
	// PID is the server's process id (soak): its resident memory is read
	// from /proc/PID/status over the run, and its exit is a crash.
	PID int
	// HTTPClient replaces the keep-alive client (tests).
	HTTPClient *http.Client
}

// Scenario defaults.
const (
	defaultTimeout         = 10 * time.Minute
	defaultSettle          = time.Second
	defaultTurns           = 4
	defaultFIMPromptTokens = 512
	backgroundMaxTokens    = 256
	maxConcurrency         = 256
)

// withDefaults fills zero fields with the scenario's defaults.
func (c Config) withDefaults() Config {
	if c.API == "" {
		c.API = OpenAI
	}
	if c.Settle == 0 {
		c.Settle = defaultSettle
	}
	if c.FIMPromptTokens == 0 {
		c.FIMPromptTokens = defaultFIMPromptTokens
	}
	c.URL = strings.TrimRight(c.URL, "/")
	c.BackgroundURL = strings.TrimRight(c.BackgroundURL, "/")
	fill := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	switch c.Scenario {
	case Decode:
		fill(&c.Concurrency, 1)
		fill(&c.Requests, c.Concurrency)
		fill(&c.MaxTokens, 256)
		fill(&c.PromptTokens, 64)
	case FIMUnderLoad:
		fill(&c.Concurrency, 4)
		fill(&c.Requests, 8)
		fill(&c.MaxTokens, 32)
		fill(&c.PromptTokens, 2000)
	case MultiTurn:
		fill(&c.Concurrency, 1)
		fill(&c.Requests, c.Concurrency)
		fill(&c.Turns, defaultTurns)
		fill(&c.MaxTokens, 64)
		fill(&c.PromptTokens, 2000)
	case Diverge:
		fill(&c.Concurrency, 1)
		fill(&c.Requests, 3)
		fill(&c.MaxTokens, 16)
		fill(&c.PromptTokens, 2000)
	case Soak:
		fill(&c.Concurrency, 32)
		fill(&c.Requests, c.Concurrency*soakRequestsPerClient)
		fill(&c.MaxTokens, 32)
		fill(&c.PromptTokens, 256)
		if c.Duration == 0 {
			c.Duration = defaultSoakDuration
		}
		if c.Timeout == 0 {
			c.Timeout = defaultSoakTimeout
		}
		if c.IdleWait == 0 {
			c.IdleWait = defaultIdleWait
		}
	}
	if c.Timeout == 0 {
		c.Timeout = defaultTimeout
	}
	return c
}

// validate checks a defaulted Config up front, so a bad flag fails before
// any traffic.
func (c Config) validate() error {
	if err := checkURL("--url", c.URL); err != nil {
		return err
	}
	u, _ := url.Parse(c.URL)
	if c.BackgroundURL != "" || c.BackgroundModel != "" {
		if c.Scenario != FIMUnderLoad {
			return fmt.Errorf("bench: --background-url and --background-model are for --scenario fim-under-load, not %q", c.Scenario)
		}
		if c.BackgroundURL != "" {
			if err := checkURL("--background-url", c.BackgroundURL); err != nil {
				return err
			}
		}
	}
	switch c.Scenario {
	case Decode, FIMUnderLoad, MultiTurn, Diverge:
	case Soak:
		if !loopbackHost(u.Hostname()) {
			return fmt.Errorf("bench: --scenario soak sends hostile traffic: only to a loopback URL, not %q", c.URL)
		}
	default:
		return fmt.Errorf("bench: --scenario %q: want decode, fim-under-load, multi-turn, diverge or soak", c.Scenario)
	}
	if c.API != OpenAI && c.API != Ollama {
		return fmt.Errorf("bench: --api %q: want openai or ollama", c.API)
	}
	if c.Concurrency > maxConcurrency {
		return fmt.Errorf("bench: --concurrency %d above %d", c.Concurrency, maxConcurrency)
	}
	if c.PID < 0 {
		return errors.New("bench: --pid must not be negative")
	}
	if c.Concurrency < 0 || c.Requests < 0 || c.Turns < 0 || c.MaxTokens < 0 || c.PromptTokens < 0 || c.FIMPromptTokens < 0 || c.Duration < 0 || c.Timeout < 0 || c.Settle < 0 || c.IdleWait < 0 || c.ReferenceTPS < 0 {
		return errors.New("bench: counts, sizes and durations must not be negative")
	}
	return nil
}

// checkURL refuses a base URL that is not http(s)://host[:port].
func checkURL(flag, raw string) error {
	u, err := url.Parse(raw)
	if raw == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("bench: %s %q: want http://host:port", flag, raw)
	}
	return nil
}

// loopbackHost reports whether host names this machine only: "localhost"
// or a loopback address. Names are not resolved: a resolver could say
// anything.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
