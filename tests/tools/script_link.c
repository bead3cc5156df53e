/* script_link.c -- prints a script as tickd loads it (src/store/script.h):
 * lib.lua's definitions it uses, then the script. For what runs tickd's
 * scripts outside tickd: the integration tests' EVALs (harness.lua_source)
 * and make bench's Redis reference for the add.
 *
 *   script_link LUA_DIR NAME      (NAME: add, claim, ...; LUA_DIR/NAME.lua) */
#include <stdio.h>
#include <stdlib.h>

#include "base/util.h"
#include "store/script.h"

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    size_t n = 0, cap = 1 << 16;
    char *b = xmalloc(cap);
    size_t got;
    while ((got = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) b = xrealloc(b, cap *= 2);
    }
    fclose(f);
    b[n] = '\0';
    return b;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: script_link LUA_DIR NAME\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s/lib.lua", argv[1]);
    char *lib = read_all(path);
    snprintf(path, sizeof(path), "%s/%s.lua", argv[1], argv[2]);
    char err[300];
    char *body = read_all(path), *out = script_link(lib, body, err, sizeof(err));
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
