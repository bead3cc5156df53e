/* script_link.c -- prints a script as tickd loads it (src/store/script.h):
 * lib.lua's definitions it uses, then the script. For what runs tickd's
 * scripts outside tickd: the integration tests' EVALs (harness.lua_source)
 * and make bench's Redis reference for the add.
 *
 *   script_link LUA_DIR NAME      (NAME: add, claim, ...; LUA_DIR/NAME.lua) */
#include <stdio.h>
#include <stdlib.h>

#include "store/script.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: script_link LUA_DIR NAME\n");
        return 2;
    }
    char err[1400];
    char *lib = script_read(argv[1], "lib", err, sizeof(err)), *body = NULL, *out = NULL;
    if (lib) body = script_read(argv[1], argv[2], err, sizeof(err));
    if (body) out = script_link(lib, body, err, sizeof(err));
    if (!out) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    fputs(out, stdout);
    free(out);
    free(body);
    free(lib);
    return 0;
}
