package reply

// markupProbes recognise the syntaxes that write a call's arguments as
// markup: one element per parameter (Qwen3-Coder, GLM, MiniMax, DeepSeek
// V3.2's DSML) or channel headers (gpt-oss).
var markupProbes = []func(p probe) (string, callSyntax, bool){}
