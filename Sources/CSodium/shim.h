#ifndef PARLEY_CSODIUM_SHIM_H
#define PARLEY_CSODIUM_SHIM_H
#include <sodium.h>
#endif
