/* fuzz_http_request.c -- the request parser (edge/http_request.c) fed
 * arbitrary bytes as http_server.c feeds it, without a socket: the input's
 * first 8 bytes choose the split points, the rest is the bytes of one or
 * more pipelined requests. They are fed whole, in two pieces split at a
 * point the first 8 bytes choose, and in pieces of 1 to 64 bytes from the
 * same seed; each way must give the same heads, bodies and refusal (a hash
 * of them), and nothing may crash, leak or read out of bounds. The input
 * format is fuzz_http_server.c's, so that each corpus seeds the other. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "edge/http_request.h"

#define MAX_BODY 4096

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ULL;   /* FNV-1a */
    return h;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    return mix(h, s, strlen(s) + 1);
}

static uint64_t mix_int(uint64_t h, uint64_t v)
{
    return mix(h, &v, sizeof(v));
}

/* The next piece's length: split = 0 whole; split = 1 the first piece cut
 * bytes, then the rest; split = 2 pieces of 1 to 64 bytes, or the rest, from
 * *seed. */
static size_t next_piece(int split, size_t off, size_t left, size_t cut, uint64_t *seed)
{
    if (split == 0) return left;
    if (split == 1) return off < cut ? cut - off : left;
    *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
    size_t n = (*seed >> 33) % 8 == 0 ? left : 1 + (*seed >> 40) % 64;
    return n < left ? n : left;
}

/* What the parser makes of data[0..size), fed in pieces, as a hash. */
static uint64_t parse(const uint8_t *data, size_t size, int split, size_t cut, uint64_t seed)
{
    /* exactly the input's size: ASan sees a byte read past what came */
    char *buf = malloc(size ? size : 1);
    size_t have = 0, off = 0;
    uint64_t h = 14695981039346656037ULL;
    http_request p;
    http_request_init(&p, MAX_BODY);
    if (!buf) abort();
    for (;;) {
        int k = http_request_parse(&p, buf, &have);
        if (have > off) abort();
        if (k == HTTP_REQ_HEAD) {
            if (p.body > have || p.nfields > HTTP_MAX_FIELDS) abort();
            h = mix_str(h, "head");
            h = mix_str(h, buf + p.method);
            h = mix_str(h, http_request_target(&p, buf));
            h = mix_int(h, (uint64_t)p.http10 | (uint64_t)p.keep_alive << 1 |
                               (uint64_t)p.head << 2 | (uint64_t)p.expect << 3 |
                               (uint64_t)p.chunked << 4);
            for (int i = 0; i < p.nfields; i++) {
                h = mix_str(h, buf + p.field[i][0]);
                h = mix_str(h, buf + p.field[i][1]);
            }
            continue;
        }
        if (k == HTTP_REQ_DONE) {
            if (p.len > have || p.body + p.body_len > p.len || p.body_len > MAX_BODY) abort();
            h = mix_str(h, "body");
            h = mix(h, buf + p.body, p.body_len);
            h = mix_int(h, p.body_len);
            memmove(buf, buf + p.len, have - p.len);
            have -= p.len;
            http_request_reset(&p);
            continue;
        }
        if (k == HTTP_REQ_ERROR) {
            h = mix_str(h, "refused");
            h = mix_int(h, (uint64_t)p.refusal.status);
            h = mix_str(h, p.refusal.reason);
            h = mix_str(h, p.refusal.code);
            h = mix_str(h, p.refusal.msg);
            if (http_request_parse(&p, buf, &have) != HTTP_REQ_ERROR) abort();
            break;
        }
        if (k != HTTP_REQ_MORE) abort();
        if (off == size) {
            h = mix_str(h, "more");
            h = mix_int(h, have);
            break;
        }
        size_t n = next_piece(split, off, size - off, cut, &seed);
        memcpy(buf + have, data + off, n);
        have += n;
        off += n;
    }
    free(buf);
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t seed = 0;
    if (size < 8) return 0;
    memcpy(&seed, data, 8);
    data += 8;
    size -= 8;
    uint64_t whole = parse(data, size, 0, 0, seed);
    if (parse(data, size, 1, seed % (size + 1), seed) != whole) abort();
    if (parse(data, size, 2, 0, seed) != whole) abort();
    return 0;
}
