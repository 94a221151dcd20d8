/* The public header must compile cleanly as strict C99 on its own. */
#include "parley.h"
#include <stdio.h>

int main(void) {
    parley_error error = {PARLEY_E_INTERNAL, "x", 0, 0};
    parley_client *client = NULL;
    (void)client;
    printf("parley %s (header %s), %s\n", parley_version(), PARLEY_VERSION_STRING, parley_error_name(error.code));
    return 0;
}
