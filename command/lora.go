package command

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"superfluid/app"
	"superfluid/engine"
)

// loraFlags are llama-server's adapter flags: --lora FILE[:SCALE] (scale 1
// when left out; repeatable) and --lora-scaled FILE:SCALE, loaded with
// the (first) model in the order given, --lora ones first.
func loraFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: "lora", Usage: "load a LoRA adapter with the model, FILE[:SCALE] (scale 1 by default, 0 loads it unapplied); repeatable. Requests choose adapters with lora: [{id, scale}], GET/POST /lora-adapters lists them and sets the scales requests get by default", EnvVars: env("LORA")},
		&cli.StringSliceFlag{Name: "lora-scaled", Usage: "load a LoRA adapter at a scale, FILE:SCALE (llama-server's --lora-scaled); repeatable"},
	}
}

// mmprojFlag is llama-server's --mmproj: the default model's projector,
// vision, audio or both (else a <model>.mmproj.gguf beside it is used).
func mmprojFlag() cli.Flag {
	return &cli.StringFlag{Name: "mmproj", Usage: "load a projector (mmproj GGUF: a vision encoder, an audio encoder or both) with the (first) model: requests may then carry images or audio; default: <model>.mmproj.gguf beside the model when there is one", EnvVars: env("MMPROJ")}
}

// loraFiles reads the adapter flags.
func loraFiles(c *cli.Context) ([]app.LoRAFile, error) {
	var out []app.LoRAFile
	for _, v := range c.StringSlice("lora") {
		f, err := parseLoRA(v, false)
		if err != nil {
			return nil, fmt.Errorf("--lora: %w", err)
		}
		out = append(out, f)
	}
	for _, v := range c.StringSlice("lora-scaled") {
		f, err := parseLoRA(v, true)
		if err != nil {
			return nil, fmt.Errorf("--lora-scaled: %w", err)
		}
		out = append(out, f)
	}
	return out, nil
}

// parseLoRA reads FILE[:SCALE]; a colon followed by what is not a number
// is part of the file's name.
func parseLoRA(v string, needScale bool) (app.LoRAFile, error) {
	f := app.LoRAFile{Path: v, Scale: 1}
	if i := strings.LastIndexByte(v, ':'); i >= 0 {
		if s, err := strconv.ParseFloat(v[i+1:], 32); err == nil {
			if math.IsNaN(s) || math.Abs(s) > engine.MaxLoRAScale {
				return f, fmt.Errorf("%q: the scale must be within [-%d, %d]", v, engine.MaxLoRAScale, engine.MaxLoRAScale)
			}
			f.Path, f.Scale = v[:i], float32(s)
			needScale = false
		}
	}
	if needScale {
		return f, fmt.Errorf("%q: FILE:SCALE expected", v)
	}
	if f.Path == "" {
		return f, fmt.Errorf("%q: no file", v)
	}
	return f, nil
}
