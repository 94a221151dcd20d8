// The public header must compile cleanly as C++ (extern "C", no C-only constructs).
#include "parley.h"
#include <cstdio>

int main() {
    parley_client *client = nullptr;
    (void)client;
    std::printf("parley %s from C++\n", parley_version());
    return 0;
}
