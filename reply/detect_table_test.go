package reply

import (
	"os"
	"path/filepath"
	"testing"

	"superfluid/chat"
)

// detectWant is the format Detect must find in one shared template, and
// whether it has a reasoning block. Name "?" is a template whose format
// is still being written (another family's); it is only logged.
type detectWant struct {
	template  string
	name      string
	reasoning bool
}

// detectTable covers every template in ../shared/templates. "generic"
// are the templates that render no calls and name no syntax: Gemma 2,
// Phi-3.5, RWKV, SmolLM3's (stripped of tools), and DeepSeek-R1's
// Llama distill, whose template concatenates arguments as a string and
// so cannot render an object.
var detectTable = []detectWant{
	{"Apertus-8B-Instruct", "apertus", false},
	{"Apriel-1.6-15b-Thinker-fixed", "apriel", true},
	{"Bielik-11B-v3.0-Instruct", "hermes", true},
	{"ByteDance-Seed-OSS", "seed-oss", true},
	{"Cohere2MoE", "command-r7b", true},
	{"CohereForAI-c4ai-command-r-plus-tool_use", "command-r", false},
	{"CohereForAI-c4ai-command-r7b-12-2024-tool_use", "command-r7b", true},
	{"GLM-4.6", "glm", true},
	{"GLM-4.7-Flash", "glm", true},
	{"GigaChat3-10B-A1.8B", "gigachat", false},
	{"GigaChat3.1-10B-A1.8B", "gigachat", false},
	{"HuggingFaceTB-SmolLM3-3B", "generic", true},
	{"Kimi-K2-Instruct", "kimi-k2", false},
	{"Kimi-K2-Thinking", "kimi-k2", true},
	{"Kimi-K3", "kimi-k3", true},
	{"LFM2-8B-A1B", "pythonic", false},
	{"LFM2.5-8B-A1B", "pythonic", true},
	{"LFM2.5-Instruct", "pythonic", false},
	{"MiMo-VL", "hermes", false},
	{"MiniMax-M1", "minimax-m1", false},
	{"MiniMax-M2", "minimax-m2", true},
	{"MiniMax-M3", "minimax-m3", true},
	{"Mistral-Small-3.2-24B-Instruct-2506", "mistral", false},
	{"NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", "qwen3-coder", true},
	{"NVIDIA-Nemotron-Nano-v2", "nemotron", true},
	{"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", "hermes", false},
	{"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", "hermes", false},
	{"Qwen-QwQ-32B", "hermes", true},
	{"Qwen-Qwen2.5-7B-Instruct", "hermes", false},
	{"Qwen-Qwen3-0.6B", "hermes", true},
	{"Qwen3-Coder", "qwen3-coder", false},
	{"Qwen3.5-4B", "qwen3-coder", true},
	{"Reka-Edge", "hermes", true},
	{"Spark2.5", "glm", true},
	{"StepFun3.5-Flash", "qwen3-coder", true},
	{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "deepseek-r1", true}, // calls render only when content is none
	{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "deepseek-r1", true},
	{"deepseek-ai-DeepSeek-V3.1", "deepseek-v3.1", true},
	{"deepseek-ai-DeepSeek-V3.2", "deepseek-dsml", true},
	{"deepseek-ai-DeepSeek-V4-Flash-0731", "deepseek-dsml", true},
	{"deepseek-ai-DeepSeek-V4", "deepseek-dsml", true},
	{"fireworks-ai-llama-3-firefunction-v2", "firefunction", false},
	{"google-gemma-2-2b-it", "generic", false},
	{"google-gemma-4-31B-it-interleaved", "gemma4", true},
	{"google-gemma-4-31B-it", "gemma4", true},
	{"ibm-granite-granite-3.3-2B-Instruct", "granite", true},
	{"ibm-granite-granite-4.0", "hermes", false},
	{"ibm-granite-granite-4.1", "hermes", false},
	{"inclusionai-ling-3.0-flash", "glm", true},
	{"llama-cpp-deepseek-r1", "deepseek-r1", true},
	{"llama-cpp-rwkv-world", "generic", true},
	{"meetkai-functionary-medium-v3.1", "functionary-v3.1", false},
	{"meetkai-functionary-medium-v3.2", "functionary-v3.2", false},
	{"meta-llama-Llama-3.1-8B-Instruct", "llama3", false},
	{"meta-llama-Llama-3.2-3B-Instruct", "llama3", false},
	{"meta-llama-Llama-3.3-70B-Instruct", "llama3", false},
	{"microsoft-Phi-3.5-mini-instruct", "generic", false},
	{"mistralai-Ministral-3-14B-Reasoning-2512", "mistral", true},
	{"mistralai-Mistral-Nemo-Instruct-2407", "mistral-nemo", false},
	{"moonshotai-Kimi-K2", "kimi-k2", false},
	{"muse-glimmer", "?", false},
	{"openai-gpt-oss-120b", "harmony", true},
	{"openbmb-MiniCPM5-1B", "minicpm", true},
	{"poolside-Laguna-S-2.1", "glm", true},
	{"poolside-Laguna-XS-2.1", "glm", true},
	{"poolside-Laguna-XS.2", "glm", true},
	{"tencent-Hy3", "hunyuan", false},
	{"unsloth-Apriel-1.5", "apriel", false},
	{"unsloth-mistral-Devstral-Small-2507", "mistral", false},
	{"upstage-Solar-Open-100B", "solar-open", false},
}

func TestDetectEveryTemplate(t *testing.T) {
	dir := "../../shared/templates"
	files, _ := filepath.Glob(filepath.Join(dir, "*.jinja"))
	if len(files) == 0 {
		t.Skip("../shared/templates is absent")
	}
	want := map[string]detectWant{}
	for _, w := range detectTable {
		want[w.template+".jinja"] = w
	}
	for _, file := range files {
		base := filepath.Base(file)
		w, ok := want[base]
		if !ok {
			t.Errorf("%s: not in the table", base)
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := chat.Parse(string(src), chat.Options{BOS: "<s>", EOS: "</s>"})
		if err != nil {
			t.Errorf("%s: parse: %v", base, err)
			continue
		}
		f := Detect(tmpl, string(src))
		switch {
		case w.name == "?":
			t.Logf("%s: %s (not checked)", base, f.Name)
		case f.Name != w.name:
			t.Errorf("%s: format %q, want %q", base, f.Name, w.name)
		case f.HasReasoning() != w.reasoning:
			t.Errorf("%s: reasoning %v, want %v", base, f.HasReasoning(), w.reasoning)
		case f.Generic != (w.name == "generic"):
			t.Errorf("%s: Generic %v", base, f.Generic)
		case !f.HasCalls():
			t.Errorf("%s: no call syntax", base)
		}
	}
	if len(files) != len(detectTable) {
		t.Errorf("%d templates, %d in the table", len(files), len(detectTable))
	}
}
