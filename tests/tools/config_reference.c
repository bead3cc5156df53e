/* config_reference.c -- prints the configuration reference in Markdown from
 * the config table (doc/configuration.md is its output: make
 * config-reference writes it, tests/integration/test_docs.py checks it). */
#include <stdio.h>

#include "base/config.h"

int main(void)
{
    config_print_reference(stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}
