package gguf

import "strings"

// fileTypeNames are llama.cpp's general.file_type values (llama_ftype) by
// the names Ollama reports as quantization_level.
var fileTypeNames = map[uint64]string{
	0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "MXFP4", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
	16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 21: "Q2_K_S", 32: "BF16",
}

// QuantizationLevel names how the file is quantized ("Q4_K_M", "F16"),
// from general.file_type; a file without it (or with a type that has no
// name) is named by its most common tensor type, a nil file "unknown".
func (f *File) QuantizationLevel() string {
	if f == nil {
		return "unknown"
	}
	for _, kv := range f.KVs {
		if kv.Key != "general.file_type" {
			continue
		}
		if ft, ok := kv.Value.Uint(); ok && fileTypeNames[ft] != "" {
			return fileTypeNames[ft]
		}
	}
	count := map[GGMLType]int{}
	best, most := "unknown", 0
	for _, t := range f.Tensors {
		if count[t.Type]++; count[t.Type] > most {
			best, most = strings.ToUpper(t.Type.String()), count[t.Type]
		}
	}
	return best
}
