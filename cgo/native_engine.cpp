// Compiles native/engine.cpp as part of this package: cgo builds only the
// sources in the package folder.
#include "../native/engine.cpp"
