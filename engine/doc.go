// Package engine defines what the scheduler and the prefix cache need from an
// inference engine: the plan a tick carries out, the events it reports, the
// model's descriptor and the sequence primitives. The cgo package implements
// it over llama.cpp; tests implement it with fakes.
//
// The plan and event records mirror the C structs of native/superfluid.h
// field for field, so the cgo binding hands the same memory to C without
// copying; change them together.
package engine
