package engine

// Descriptor describes an open model and the engine around it.
type Descriptor struct {
	Architecture string `json:"architecture"`
	Vocab        int    `json:"vocab_size"`
	Ctx          int    `json:"context"`
	CtxTrain     int    `json:"context_train"`
	Seqs         int    `json:"max_sequences"`
	Lanes        int    `json:"max_lanes"`
	Batch        int    `json:"batch"`
	UBatch       int    `json:"ubatch"` // llama_decode's micro-batch; 0: min(Batch, 512)
	Embd         int    `json:"embedding"`
	Layers       int    `json:"layers"`
	// CacheTypeK and CacheTypeV are the K and V caches' cell types as
	// llama.cpp names them (f16, q8_0, ...); KVBytesPerToken is what one
	// context token takes in both, as the engine allocated them (a
	// sliding-window cache at its share of the context, recurrent layers
	// none; every layer's on the Go module's llama.cpp).
	// RecurrentStateBytes is the recurrent layers' state of every
	// sequence, fixed whatever the context (0: none).
	CacheTypeK          string `json:"cache_type_k"`
	CacheTypeV          string `json:"cache_type_v"`
	KVBytesPerToken     int64  `json:"kv_bytes_per_token"`
	RecurrentStateBytes int64  `json:"recurrent_state_bytes,omitempty"`
	// MTPBytes is the multi-token prediction block's own KV cache, for an
	// engine opened with it (--spec-type draft-mtp; 0: none).
	MTPBytes          int64   `json:"mtp_bytes,omitempty"`
	BOS               Token   `json:"bos"`
	EOS               Token   `json:"eos"`
	EOT               Token   `json:"eot"`
	EOG               []Token `json:"eog"`
	AddBOS            bool    `json:"add_bos"`
	FIM               FIM     `json:"fim"`
	ChatTemplate      string  `json:"chat_template"`
	PartialTruncation bool    `json:"partial_truncation"`
	// Partial is what a cut can lose (PartialNone: nothing, and then
	// PartialTruncation holds); SlidingWindow the window in tokens.
	Partial       Partial `json:"partial_state,omitempty"`
	SlidingWindow int     `json:"sliding_window,omitempty"`
	// The engine checkpoints partial state every CheckpointEvery prompt
	// tokens and at a prompt's end, keeping the last CheckpointMax per
	// sequence (0: it takes none).
	CheckpointEvery int `json:"checkpoint_every,omitempty"`
	CheckpointMax   int `json:"checkpoint_max,omitempty"`
	// CheckpointTail: a recurrent model's engine also checkpoints this
	// many tokens before a prompt's end, where the planner ends a step, so
	// the same prompt again resumes there (0: none).
	CheckpointTail int `json:"checkpoint_tail,omitempty"`
	// Drafts: decodes may carry drafts (Decode.DraftLen); false on
	// sliding-window models, and on recurrent and hybrid ones unless opened
	// for speculation on an architecture llama.cpp rolls back, where
	// DraftMax bounds a draft (0: only the batch does). DraftsRefused says
	// why not.
	Drafts        bool   `json:"drafts"`
	DraftMax      int    `json:"draft_max,omitempty"`
	DraftsRefused string `json:"drafts_refused,omitempty"`
	Params        uint64 `json:"parameters"`
	ModelBytes    uint64 `json:"model_bytes"`
	Identity      string `json:"identity"` // digest of the model file
	// Recommended is what the model file recommends for sampling
	// (general.sampling.* in the GGUF); see SamplingDefaults.
	Recommended ModelSampling `json:"recommended_sampling"`
	// Pooling is not PoolingNone for an embedding model, whose engine
	// embeds (Embedder) and does not generate; PoolingRank for a reranker.
	Pooling Pooling `json:"pooling"`
	// What a reranker's query-document pairs are built from, as
	// llama-server builds them: the model's rerank template
	// (tokenizer.chat_template.rerank, "" when it has none), else BOS,
	// query, EOS, SEP, document, EOS as the vocabulary adds them.
	RerankTemplate string `json:"rerank_template,omitempty"`
	SEP            Token  `json:"sep"`
	AddEOS         bool   `json:"add_eos"`
	AddSEP         bool   `json:"add_sep"`
	// LoRA is how many LoRA adapters the engine loaded (the length of a
	// plan's LoRA scales).
	LoRA int `json:"lora_adapters,omitempty"`
	// LoRAIdentity is each adapter's file digest (hex sha256 of its
	// bytes), in load order: what names an adapter set across processes
	// (AdapterSetOf).
	LoRAIdentity []string `json:"lora_identity,omitempty"`
}

// ModelSampling holds the sampling values a model file recommends; the Has
// fields say which keys the file has.
type ModelSampling struct {
	TopK    int32   `json:"top_k"`
	TopP    float32 `json:"top_p"`
	MinP    float32 `json:"min_p"`
	HasTopK bool    `json:"has_top_k"`
	HasTopP bool    `json:"has_top_p"`
	HasMinP bool    `json:"has_min_p"`
}

// Default truncation samplers where neither the request nor the model
// says: llama-server's.
const (
	DefaultTopK int32   = 40
	DefaultTopP float32 = 0.95
	DefaultMinP float32 = 0.05
)

// SamplingDefaults are the top-k, top-p and min-p a request that names none
// of them samples with: the model's recommendation where it has one, else
// llama-server's defaults.
func (d *Descriptor) SamplingDefaults() (topK int32, topP, minP float32) {
	topK, topP, minP = DefaultTopK, DefaultTopP, DefaultMinP
	r := d.Recommended
	if r.HasTopK {
		topK = r.TopK
	}
	if r.HasTopP {
		topP = r.TopP
	}
	if r.HasMinP {
		minP = r.MinP
	}
	return topK, topP, minP
}

// FIM names the fill-in-the-middle tokens; -1 where the vocabulary has none.
type FIM struct {
	Prefix   Token `json:"prefix"`
	Suffix   Token `json:"suffix"`
	Middle   Token `json:"middle"`
	Pad      Token `json:"pad"`
	RepoName Token `json:"repo_name"`
	FileSep  Token `json:"file_separator"`
}

// Capable reports whether the vocabulary has the three FIM tokens.
func (f FIM) Capable() bool { return f.Prefix >= 0 && f.Suffix >= 0 && f.Middle >= 0 }

// IsEOG reports whether t ends generation.
func (d *Descriptor) IsEOG(t Token) bool {
	for _, e := range d.EOG {
		if e == t {
			return true
		}
	}
	return false
}

// Engine runs steps and keeps sequences. One goroutine owns it.
type Engine interface {
	Descriptor() *Descriptor
	// Tick carries out a plan: one step. The events belong to the engine
	// until the next Tick. A malformed plan changes nothing and returns an
	// *Error.
	Tick(p *Plan) (*Events, error)

	// CopyPrefix makes dst hold the first n tokens of src.
	CopyPrefix(src, dst int32, n int) error
	// Truncate keeps the first keep tokens of seq.
	Truncate(seq int32, keep int) error
	// Free empties seq.
	Free(seq int32) error
	// SeqLen is the number of tokens seq holds.
	SeqLen(seq int32) int
	// Export appends seq's state to dst.
	Export(seq int32, dst []byte) ([]byte, error)
	// Import replaces seq's contents with exported state and returns the
	// number of tokens it holds.
	Import(seq int32, data []byte) (int, error)
}

// TailState is implemented by engines that can export and import the end
// of a full-attention sequence alone: the prefix cache copies out only
// the part of a stream it cuts while another sequence keeps the rest
// (kv: an edit's hand-over). Owner goroutine, as Engine.
type TailState interface {
	// ExportTail appends the state of seq's tokens from from on (a tail
	// blob) to dst; an error where the model has no tails to take apart
	// (sliding-window or recurrent layers).
	ExportTail(seq int32, from int, dst []byte) ([]byte, error)
	// ImportTail appends a tail blob to seq, which holds exactly the
	// stream's tokens before the tail, and returns the tokens seq holds;
	// on failure seq keeps those it held.
	ImportTail(seq int32, data []byte) (int, error)
}
