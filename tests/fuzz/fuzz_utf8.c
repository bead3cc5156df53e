/* fuzz_utf8.c -- libFuzzer target for the UTF-8 check (util_utf8_valid,
 * util_utf8_seq) and the cleaning built on it (util_text_clean).
 *
 * The reference is glibc's iconv from UTF-8 to UTF-32LE, a decoder written
 * apart from tickd's that keeps RFC 3629 strictly (overlongs, surrogates,
 * F5-FF and past U+10FFFF refused, a cut sequence reported); mbrtowc in
 * C.UTF-8 is not used: it takes 5- and 6-byte forms and code points past
 * U+10FFFF. Both must agree on whether the input is UTF-8 and, when it is
 * not, on where the first bad sequence starts. The sequence lengths
 * util_utf8_seq gives must tile valid input, and cleaned input must be valid
 * with valid input left as it was (but for control bytes). */
#include <errno.h>
#include <iconv.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

/* 1 if s[0..n) is UTF-8 for iconv, else 0 with the start of the first
 * sequence it refused or found cut short in *bad. */
static int ref_valid(const char *s, size_t n, size_t *bad)
{
    static iconv_t cd = (iconv_t)-1;
    static char *out;
    static size_t outcap;
    if (cd == (iconv_t)-1) {
        cd = iconv_open("UTF-32LE", "UTF-8");
        if (cd == (iconv_t)-1) abort();
    }
    if (outcap < 4 * n + 4) {
        outcap = 4 * n + 4;
        out = realloc(out, outcap);
        if (!out) abort();
    }
    iconv(cd, NULL, NULL, NULL, NULL);
    char *in = (char *)s, *o = out;
    size_t il = n, ol = outcap;
    size_t r = iconv(cd, &in, &il, &o, &ol);
    if (r != (size_t)-1) return 1;
    if (errno != EILSEQ && errno != EINVAL) abort();
    *bad = (size_t)(in - s);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    size_t bad = (size_t)-1, ref_bad = (size_t)-2;
    int ok = util_utf8_valid(s, size, &bad), ref = ref_valid(s, size, &ref_bad);
    if (ok != ref || (!ok && bad != ref_bad)) {
        fprintf(stderr, "util_utf8_valid %d (bad at %zu), iconv %d (bad at %zu)\n", ok, bad, ref,
                ref_bad);
        abort();
    }
    /* the sequences tile the valid prefix, ending where the check stopped */
    size_t i = 0, end = ok ? size : bad;
    while (i < end) {
        size_t k = util_utf8_seq(s + i, size - i);
        if (k < 1 || k > 4 || i + k > end) abort();
        /* one sequence alone is valid for iconv too */
        size_t b;
        if (!ref_valid(s + i, k, &b)) abort();
        i += k;
    }
    if (i != end || (!ok && util_utf8_seq(s + bad, size - bad) != 0)) abort();

    char *c = malloc(size ? size : 1);
    if (!c) abort();
    memcpy(c, s, size);
    util_text_clean(c, size);
    size_t cb;
    if (!ref_valid(c, size, &cb)) abort();
    for (size_t k = 0; k < size; k++) {
        unsigned char x = (unsigned char)s[k];
        int control = (x < 0x20 && x != '\t' && x != '\n' && x != '\r') || x == 0x7f;
        if (c[k] != s[k] && (c[k] != '?' || (ok && !control))) abort();
    }
    free(c);
    return 0;
}
