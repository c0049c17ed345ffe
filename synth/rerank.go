package synth

import "superfluid/gguf"

// A reranker is a qwen3 model with pooling_type rank, as llama.cpp loads
// Qwen3-Reranker: the context pools each sequence's last token, a
// cls.output head maps it to one logit per classifier label, and llama.cpp
// softmaxes them; a sequence's score is the first label's probability.
// The head's rows are random like every other weight, so the scores are
// arbitrary but deterministic: what tests need is an order the model
// computes, not a meaningful one.

// poolingRank is LLAMA_POOLING_TYPE_RANK.
const poolingRank = 4

// RerankLabels are the classifier labels the synthetic reranker is written
// with: two, so that the softmax over them leaves a score that varies.
var RerankLabels = []string{"yes", "no"}

// RerankTemplate is the synthetic reranker's tokenizer.chat_template.rerank:
// llama-server puts the query and the document in place of {query} and
// {document} and tokenizes the result with special tokens parsed.
const RerankTemplate = "<|im_start|>system\nSay yes when the document answers the query, no otherwise.<|im_end|>\n" +
	"<|im_start|>user\nquery: {query}\ndocument: {document}<|im_end|>\n<|im_start|>assistant\n"

// addRerankHead writes the labels, the rerank template and the head.
func addRerankHead(w *gguf.Writer, s Shape, g gen) {
	w.Set("qwen3.classifier.output_labels", RerankLabels)
	w.Set("tokenizer.chat_template.rerank", RerankTemplate)
	w.AddTensor(g.matrix("cls.output.weight", s.Embd, len(RerankLabels), inv(s.Embd), nil))
}
