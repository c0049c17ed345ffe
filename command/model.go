package command

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"superfluid/cgo"
	"superfluid/synth"
)

func cpuFeatures() string { return cgo.CPUFeatures() }
func cpuVariant() string  { return cgo.CPUVariant() }
func llamaCommit() string { return cgo.LlamaCommit() }
func llamaSource() string { return cgo.LlamaSource() }

func modelCommand() *cli.Command {
	return &cli.Command{
		Name:  "model",
		Usage: "inspect or generate GGUF models",
		Subcommands: []*cli.Command{
			{
				Name:  "info",
				Usage: "print a model's descriptor as JSON (with kv_bytes_per_token at the cache types given)",
				Flags: append([]cli.Flag{
					&cli.StringFlag{Name: "model", Aliases: []string{"m"}, Required: true, Usage: "GGUF file or pulled model name", EnvVars: []string{"SUPERFLUID_MODEL"}},
					dataDirFlag(),
					modelsDirFlag(),
				}, cacheTypeFlags()...),
				Action: modelInfo,
			},
			{
				Name:  "synth",
				Usage: "write a synthetic model (llama or a named architecture) with seeded random weights",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "shape", Value: "tiny", Usage: "tiny, small or 0.5b"},
					&cli.StringFlag{Name: "arch", Value: "llama", Usage: "architecture: " + strings.Join(synth.ArchNames(), ", ") + " (gemma4: sliding window; qwen35: hybrid attention and gated delta net; qwen3moe: 8 experts, 2 used; qwen35moe: both; glm4moe: experts and a multi-token prediction block, for --spec-type draft-mtp; qwen35mtp: qwen35 with one)"},
					&cli.StringFlag{Name: "vocab", Usage: "graft the tokenizer of this vocab-only GGUF (default: a built-in byte-level BPE with ChatML and FIM tokens)"},
					&cli.IntFlag{Name: "vocab-size", Usage: "pad the built-in vocabulary to this many tokens (default: the shape's; a tiny draft model for a 0.5b target needs 151936, the 0.5b shape's)"},
					&cli.StringFlag{Name: "type", Value: "f16", Usage: "weight type: f16, q8_0 or q4_0"},
					&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "random seed"},
					&cli.StringFlag{Name: "pooling", Usage: "make an embedding model pooling its tokens so: mean, cls or last; rank makes a reranker (qwen3 only) (default: none, a generation model)"},
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "output file"},
					&cli.StringFlag{Name: "lora", Usage: "also write a LoRA adapter for the model to this file (llama, qwen2 and qwen3; --seed draws it too)"},
					&cli.StringFlag{Name: "mmproj", Usage: "also write a projector for the model to this file (llama, qwen2 and qwen3; --mmproj-modality says which encoders; --seed draws it too)"},
					&cli.StringFlag{Name: "mmproj-modality", Value: synth.ModalityVision, Usage: "the encoders --mmproj carries: vision (LLaVA's MLP layout, " + fmt.Sprint(synth.MMProjImageTokens) + " rows per image), audio (Ultravox's Whisper encoder, " + fmt.Sprint(synth.MMProjAudioTokens) + " rows per 30 s of audio) or both in one file"},
					// Hidden: a projector mtmd cannot encode audio with (8 is
					// Ultravox's own), for testing that serve refuses its audio.
					&cli.IntFlag{Name: "mmproj-audio-stack", Hidden: true, Usage: "the audio encoder's frame stacking (default " + fmt.Sprint(synth.MMProjAudioStack) + ")"},
				},
				Action: modelSynth,
			},
		},
	}
}

func modelInfo(c *cli.Context) error {
	if c.Args().Present() {
		return fmt.Errorf("model info: unexpected argument %q", c.Args().First())
	}
	typeK, typeV, err := cacheTypes(c, "")
	if err != nil {
		return fmt.Errorf("model info: %w", err)
	}
	modelPath, err := resolveModelFlag(c)
	if err != nil {
		return err
	}
	e, err := cgo.Open(cgo.Options{ModelPath: modelPath, Ctx: 512, Lanes: 1, Seqs: 1, Batch: 32, Threads: 1, CacheTypeK: typeK, CacheTypeV: typeV})
	if err != nil {
		return err
	}
	defer e.Close()
	out, err := json.MarshalIndent(e.Descriptor(), "", "  ")
	if err != nil {
		return fmt.Errorf("model info: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "%s\n", out)
	return nil
}

func modelSynth(c *cli.Context) error {
	shape, err := synth.ShapeByName(c.String("shape"))
	if err != nil {
		return err
	}
	if n := c.Int("vocab-size"); n != 0 {
		if c.String("vocab") != "" {
			return fmt.Errorf("model synth: --vocab-size pads the built-in vocabulary; a grafted one (--vocab) has its own size")
		}
		shape.Vocab = n
	}
	start := time.Now()
	opts := synth.Options{Shape: shape, VocabFile: c.String("vocab"), Type: c.String("type"), Seed: c.Uint64("seed"), Arch: c.String("arch"), Pooling: c.String("pooling")}
	if err := synth.Write(c.String("output"), opts); err != nil {
		return err
	}
	slog.Info("model written", "file", c.String("output"), "shape", shape.Name, "type", opts.Type, "took", time.Since(start).Round(time.Millisecond))
	if out := c.String("lora"); out != "" {
		if err := synth.WriteLoRA(out, synth.LoRAOptions{Shape: shape, Arch: opts.Arch, Seed: opts.Seed}); err != nil {
			return err
		}
		slog.Info("LoRA adapter written", "file", out)
	}
	if out := c.String("mmproj"); out != "" {
		if err := synth.WriteMMProj(out, synth.MMProjOptions{Shape: shape, Arch: opts.Arch, Seed: opts.Seed, Modality: c.String("mmproj-modality"), AudioStack: c.Int("mmproj-audio-stack")}); err != nil {
			return err
		}
		slog.Info("projector written", "file", out, "modality", c.String("mmproj-modality"))
	}
	return nil
}
