package task

// llama-server's defaults for what its /completion request may leave out,
// where they differ from every API's (Sampling, SamplingDefaults): the
// native API and `superfluid run` start from the same values.
const (
	LlamaTemperature = 0.8
	LlamaRepeatLastN = 64
)
