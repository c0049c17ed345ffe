// Compiles native/bench.cpp as part of this package: cgo builds only the
// sources in the package folder.
#include "../native/bench.cpp"
