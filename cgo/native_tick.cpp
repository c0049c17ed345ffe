// Compiles native/tick.cpp as part of this package: cgo builds only the
// sources in the package folder.
#include "../native/tick.cpp"
