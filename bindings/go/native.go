package parley

// The C side lives in shim.c (declared in shim.h); cgo compiles it with the flags below.

/*
#cgo pkg-config: parley
#include "shim.h"
*/
import "C"
