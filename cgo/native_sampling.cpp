// Compiles native/sampling.cpp as part of this package: cgo builds only the
// sources in the package folder.
#include "../native/sampling.cpp"
