/* script.c -- lib.lua's definitions a script uses, linked before it
 * (script.h). */
#include "store/script.h"

#include <errno.h>
#include <stdio.h>
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
 * "local a, b = ..." makes a and b. 0, or -1 when the line is not of either
 * form (or names more than DEF_NAMES, or a name too long). */
static int def_names(def *d, const char *line, const char *end)
{
    const char *p = line + 6;   /* past "local " */
    if (end - p > 9 && strncmp(p, "function ", 9) == 0) {
        p += 9;
        if (!ident_start(*p) || ident_at(p, end, d->names[0]) >= NAME_MAX_LEN) return -1;
        d->nnames = 1;
        return 0;
    }
    for (;;) {
        if (!ident_start(*p) || d->nnames == DEF_NAMES) return -1;
        if ((size_t)ident_at(p, end, d->names[d->nnames]) >= NAME_MAX_LEN) return -1;
        p += strlen(d->names[d->nnames++]);
        if (p + 3 <= end && strncmp(p, " = ", 3) == 0) return 0;
        if (p + 2 > end || strncmp(p, ", ", 2) != 0) return -1;
        p += 2;
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

char *script_read(const char *dir, const char *name, char *err, size_t errlen)
{
    char path[1200];
    snprintf(path, sizeof(path), "%s/%s.lua", dir, name);
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, errlen, "%s: cannot read", path);
        free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A column-0 line of lib: a definition's first ("local "), or one of those
 * inside a definition that reach column 0 (its "end", a table's "}"), a
 * comment, or blank. */
static int line_known(const char *line, size_t n)
{
    return n == 0 || strncmp(line, "local ", 6) == 0 || strncmp(line, "--", 2) == 0 ||
           (n >= 3 && strncmp(line, "end", 3) == 0 && (n == 3 || !ident_char(line[3]))) ||
           line[0] == '}' || line[0] == ' ' || line[0] == '\t';
}

char *script_link(const char *lib, const char *body, char *err, size_t errlen)
{
    size_t lib_len = strlen(lib), body_len = strlen(body);
    int cap = 16, n = 0, lineno = 0;
    def *defs = xcalloc((size_t)cap, sizeof(*defs));
    /* (a long string or comment could hold a line of column 0 that is not
     * code: lib.lua has none, and must not) */
    const char *long_bracket = strstr(lib, "[[");
    if (!long_bracket) long_bracket = strstr(lib, "[=");
    if (long_bracket) {
        snprintf(err, errlen, "lib.lua: a long bracket ([[ or [=) at byte %zu: not read here",
                 (size_t)(long_bracket - lib));
        goto fail;
    }
    /* where the comment lines right above the next line began (or none) */
    size_t block = (size_t)-1;
    for (size_t at = 0; at < lib_len;) {
        const char *line = lib + at, *nl = memchr(line, '\n', lib_len - at);
        size_t next = nl ? (size_t)(nl - lib) + 1 : lib_len, len = (nl ? nl : lib + lib_len) - line;
        lineno++;
        if (!line_known(line, len)) {
            snprintf(err, errlen, "lib.lua line %d: not a definition (\"local \" at column 0), "
                     "its end, a comment or blank: \"%.40s\"", lineno, line);
            goto fail;
        }
        if (strncmp(line, "local ", 6) == 0) {
            size_t from = block != (size_t)-1 ? block : at;
            if (n) defs[n - 1].to = from;
            if (n == cap) {
                defs = xrealloc(defs, (size_t)cap * 2 * sizeof(*defs));
                memset(defs + cap, 0, (size_t)cap * sizeof(*defs));
                cap *= 2;
            }
            defs[n].from = from;
            if (def_names(&defs[n], line, line + len) != 0) {
                snprintf(err, errlen, "lib.lua line %d: a definition is \"local function name(\" "
                         "or \"local a, b = \" (at most %d names): \"%.40s\"",
                         lineno, DEF_NAMES, line);
                goto fail;
            }
            for (int k = 0; k < defs[n].nnames; k++)
                if (def_of(defs, n, defs[n].names[k]) >= 0) {
                    snprintf(err, errlen, "lib.lua line %d: %s defined twice", lineno,
                             defs[n].names[k]);
                    goto fail;
                }
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
fail:
    free(defs);
    return NULL;
}
