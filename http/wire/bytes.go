package wire

// ByteList is b as a JSON array of numbers, the shape OpenAI's and
// llama.cpp's logprobs give a token's bytes in.
func ByteList(b []byte) []int {
	out := make([]int, len(b))
	for i, c := range b {
		out[i] = int(c)
	}
	return out
}
