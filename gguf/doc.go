// Package gguf reads and writes GGUF model files (format versions 2 and 3,
// little-endian), the container llama.cpp loads.
//
// The reader parses only the header, the metadata key/values and the
// tensor descriptors: tensor data is never loaded, because vocabulary-only
// files have none and model files can be hundreds of megabytes. Every length
// read from the file is checked against what is left of it before anything
// is allocated, so a corrupt or hostile file yields an error rather than an
// out-of-memory crash.
//
// The writer streams tensor data so that a large model never has to be held
// in memory as a whole.
package gguf

// Magic is the four bytes every GGUF file starts with.
const Magic = "GGUF"

// Version is the format version the writer produces.
const Version = 3

// DefaultAlignment is the tensor data alignment used when a file does not
// set general.alignment.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that overrides DefaultAlignment.
const KeyAlignment = "general.alignment"

// MaxDims is the largest number of dimensions a tensor may have; ggml
// refuses more, so a file claiming more is corrupt for our purposes.
const MaxDims = 4
