/* script.c -- lib.lua's definitions a script uses, linked before it
 * (script.h). */
#include "store/script.h"

#include <stdlib.h>
#include <string.h>

#include "base/util.h"

#define DEF_NAMES 8      /* names one definition makes (local a, b, ... =) */
#define NAME_MAX_LEN 64

typedef struct def {
    size_t from, to;                          /* its text: lib[from..to) */
    char names[DEF_NAMES][NAME_MAX_LEN];
    int nnames;
    int used;
} def;

static int ident_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
static int ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }

/* The identifier at s (s[0] an ident_start), copied into out when it fits;
 * returns its length. */
static size_t ident_at(const char *s, const char *end, char out[NAME_MAX_LEN])
{
    size_t n = 0;
    while (s + n < end && ident_char(s[n])) n++;
    size_t k = n < NAME_MAX_LEN ? n : NAME_MAX_LEN - 1;
    memcpy(out, s, k);
    out[k] = '\0';
    return n;
}

/* The names a line "local ..." defines: "local function f(" makes f,
 * "local a, b = ..." makes a and b. */
static void def_names(def *d, const char *line, const char *end)
{
    const char *p = line + 6;   /* past "local " */
    if (end - p > 9 && strncmp(p, "function ", 9) == 0) {
        p += 9;
        if (ident_start(*p)) {
            ident_at(p, end, d->names[0]);
            d->nnames = 1;
        }
        return;
    }
    while (p < end && *p != '=' && d->nnames < DEF_NAMES) {
        if (ident_start(*p)) p += ident_at(p, end, d->names[d->nnames++]);
        else p++;
    }
}

/* The definition that makes name, or -1 */
static int def_of(const def *defs, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        for (int k = 0; k < defs[i].nnames; k++)
            if (strcmp(defs[i].names[k], name) == 0) return i;
    return -1;
}

/* Mark used every definition that text[0..len) names, and (through the
 * stack) those they name. */
static void mark_named(def *defs, int n, const char *lib, const char *text, size_t len,
                       int *stack, int *top)
{
    const char *p = text, *end = text + len;
    char name[NAME_MAX_LEN];
    while (p < end) {
        /* a word begins after a character that is not one of a word's */
        if (!ident_start(*p) || (p > text && ident_char(p[-1]))) {
            p++;
            continue;
        }
        p += ident_at(p, end, name);
        int i = def_of(defs, n, name);
        if (i >= 0 && !defs[i].used) {
            defs[i].used = 1;
            stack[(*top)++] = i;
        }
    }
    while (*top > 0) {
        const def *d = &defs[stack[--(*top)]];
        mark_named(defs, n, lib, lib + d->from, d->to - d->from, stack, top);
    }
}

static int is_comment_line(const char *s) { return s[0] == '-' && s[1] == '-'; }

char *script_link(const char *lib, const char *body)
{
    size_t lib_len = strlen(lib), body_len = strlen(body);
    int cap = 16, n = 0;
    def *defs = xcalloc((size_t)cap, sizeof(*defs));
    /* where the comment lines right above the next line began (or none) */
    size_t block = (size_t)-1;
    for (size_t at = 0; at < lib_len;) {
        const char *line = lib + at, *nl = memchr(line, '\n', lib_len - at);
        size_t next = nl ? (size_t)(nl - lib) + 1 : lib_len;
        if (strncmp(line, "local ", 6) == 0) {
            size_t from = block != (size_t)-1 ? block : at;
            if (n) defs[n - 1].to = from;
            if (n == cap) {
                defs = xrealloc(defs, (size_t)cap * 2 * sizeof(*defs));
                memset(defs + cap, 0, (size_t)cap * sizeof(*defs));
                cap *= 2;
            }
            defs[n].from = from;
            def_names(&defs[n], line, nl ? nl : lib + lib_len);
            n++;
            block = (size_t)-1;
        } else if (is_comment_line(line)) {
            if (block == (size_t)-1) block = at;
        } else {
            block = (size_t)-1;
        }
        at = next;
    }
    if (n) defs[n - 1].to = lib_len;

    int *stack = xmalloc(((size_t)n + 1) * sizeof(*stack)), top = 0;
    mark_named(defs, n, lib, body, body_len, stack, &top);
    free(stack);

    char *out = xmalloc(lib_len + body_len + 2), *w = out;
    for (int i = 0; i < n; i++) {
        if (!defs[i].used) continue;
        memcpy(w, lib + defs[i].from, defs[i].to - defs[i].from);
        w += defs[i].to - defs[i].from;
    }
    *w++ = '\n';
    memcpy(w, body, body_len + 1);
    free(defs);
    return out;
}
