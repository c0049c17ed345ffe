package ollama

import (
	"encoding/json"
	"time"

	"superfluid/engine"
)

// The Ollama request and response bodies, field for field as
// github.com/ollama/ollama/api (v0.24.0) sends and reads them. Fields the
// server cannot honour are decoded anyway, so that a request using them is
// refused by name instead of being silently misunderstood.

type generateRequest struct {
	Model     string                     `json:"model"`
	Prompt    string                     `json:"prompt"`
	Suffix    string                     `json:"suffix"`
	System    string                     `json:"system"`
	Template  string                     `json:"template"`
	Context   []int64                    `json:"context"`
	Stream    *bool                      `json:"stream"`
	Raw       bool                       `json:"raw"`
	Format    json.RawMessage            `json:"format"`
	KeepAlive json.RawMessage            `json:"keep_alive"`
	Images    json.RawMessage            `json:"images"`
	Options   map[string]json.RawMessage `json:"options"`
	Think     json.RawMessage            `json:"think"`
	Truncate  *bool                      `json:"truncate"`
	Shift     *bool                      `json:"shift"`
	Logprobs  bool                       `json:"logprobs"`
	TopLogs   int                        `json:"top_logprobs"`
}

type chatRequest struct {
	Model     string                     `json:"model"`
	Messages  []message                  `json:"messages"`
	Stream    *bool                      `json:"stream"`
	Format    json.RawMessage            `json:"format"`
	KeepAlive json.RawMessage            `json:"keep_alive"`
	Tools     json.RawMessage            `json:"tools"`
	Options   map[string]json.RawMessage `json:"options"`
	Think     json.RawMessage            `json:"think"`
	Truncate  *bool                      `json:"truncate"`
	Shift     *bool                      `json:"shift"`
	Logprobs  bool                       `json:"logprobs"`
	TopLogs   int                        `json:"top_logprobs"`
}

type message struct {
	Role      string          `json:"role"`
	Content   string          `json:"content"`
	Thinking  string          `json:"thinking"`
	Images    json.RawMessage `json:"images"`
	ToolCalls json.RawMessage `json:"tool_calls"`
	ToolName  string          `json:"tool_name"`
}

type showRequest struct {
	Model   string `json:"model"`
	Name    string `json:"name"` // the field's name before "model"
	Verbose bool   `json:"verbose"`
}

// metrics are the timings and counts of a finished generation; Ollama
// leaves the zero ones out.
type metrics struct {
	TotalDuration      time.Duration `json:"total_duration,omitempty"`
	LoadDuration       time.Duration `json:"load_duration,omitempty"`
	PromptEvalCount    int           `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration time.Duration `json:"prompt_eval_duration,omitempty"`
	EvalCount          int           `json:"eval_count,omitempty"`
	EvalDuration       time.Duration `json:"eval_duration,omitempty"`
}

type tokenLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes,omitempty"`
}

type logprob struct {
	tokenLogprob
	TopLogprobs []tokenLogprob `json:"top_logprobs,omitempty"`
}

type generateResponse struct {
	Model      string         `json:"model"`
	CreatedAt  time.Time      `json:"created_at"`
	Response   string         `json:"response"`
	Done       bool           `json:"done"`
	DoneReason string         `json:"done_reason,omitempty"`
	Context    []engine.Token `json:"context,omitempty"`
	metrics
	Logprobs []logprob `json:"logprobs,omitempty"`
}

type replyMessage struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	Thinking  string     `json:"thinking,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// toolCall is a call as Ollama returns it: arguments an object.
type toolCall struct {
	ID       string       `json:"id,omitempty"`
	Function toolFunction `json:"function"`
}

type toolFunction struct {
	Index     int             `json:"index"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type chatResponse struct {
	Model      string       `json:"model"`
	CreatedAt  time.Time    `json:"created_at"`
	Message    replyMessage `json:"message"`
	Done       bool         `json:"done"`
	DoneReason string       `json:"done_reason,omitempty"`
	metrics
	Logprobs []logprob `json:"logprobs,omitempty"`
}

type details struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

type listModel struct {
	Name       string    `json:"name"`
	Model      string    `json:"model"`
	ModifiedAt time.Time `json:"modified_at"`
	Size       int64     `json:"size"`
	Digest     string    `json:"digest"`
	Details    details   `json:"details"`
}

type runningModel struct {
	Name          string    `json:"name"`
	Model         string    `json:"model"`
	Size          int64     `json:"size"`
	Digest        string    `json:"digest"`
	Details       details   `json:"details"`
	ExpiresAt     time.Time `json:"expires_at"`
	SizeVRAM      int64     `json:"size_vram"`
	ContextLength int       `json:"context_length"`
	// Cache is superfluid's own addition: the model's conversations
	// resident in the KV pool, in host memory and parked on disk.
	Cache any `json:"superfluid_cache,omitempty"`
}

type showResponse struct {
	Modelfile    string         `json:"modelfile"`
	Parameters   string         `json:"parameters"`
	Template     string         `json:"template"`
	Details      details        `json:"details"`
	ModelInfo    map[string]any `json:"model_info"`
	Capabilities []string       `json:"capabilities"`
	ModifiedAt   time.Time      `json:"modified_at"`
}
