/* h1_answer.h -- the parser of HTTP/1.1 answers for the built-in callback
 * client (h1.c): status line, framing (Content-Length, chunked, or up to the
 * close) and the body, which is counted and dropped, but for the first
 * H1_KEEP_MAX bytes of a non-2xx answer's when the caller asks (keep_on).
 *
 * Lenient where libcurl is (lines may end in LF alone; interim 1xx answers
 * are skipped; a chunk extension is dropped however long), strict where
 * framing is at stake (a Content-Length that is not digits, two that differ,
 * a bad chunk size: malformed) and where libcurl is (HTTP/1.0 and 1.1 only, a
 * header line without a colon, a NUL in the head, a trailer line of 4 KiB).
 * libcurl's answers are judged by this parser too (dispatch.c hands it each
 * head libcurl reads), so that both callback clients take and refuse the same
 * answers. A body is read to its end only up to H1_DRAIN_MAX bytes: past
 * that, or with no length, the answer is complete at its head and the
 * connection must close. Fed any split of the bytes, the result is the same. */
#ifndef TICKD_H1_ANSWER_H
#define TICKD_H1_ANSWER_H

#include <stddef.h>
#include <stdint.h>

#define H1_HEAD_MAX 65536       /* longest answer head read */
#define H1_LINE_MAX 4096        /* a trailer line is shorter; a chunk-size line's start (its
                                   extension past that is read and dropped) */
#define H1_DRAIN_MAX 1048576    /* a longer body is not read: the connection closes instead */
#define H1_KEEP_MAX 1024        /* bytes kept of a failed answer's body */

enum { PH_HEAD, PH_BODY, PH_CHUNK_SIZE, PH_CHUNK_EXT, PH_CHUNK_DATA, PH_CHUNK_CRLF, PH_TRAILER,
       PH_DONE };

typedef struct h1_answer {
    int head_req;               /* set by the caller: HEAD, the answer has no body */
    int phase;
    long status;                /* of the last head read (0: none yet) */
    int close;                  /* the connection ends with this answer */
    int capped;                 /* the body was over H1_DRAIN_MAX: not read to its end */
    int64_t remain;             /* bytes left of the body or chunk */
    int64_t body;               /* body bytes read */
    int keep_on;                /* set by the caller: keep a non-2xx body's start */
    char *keep;                 /* malloc'd at its first byte; the caller frees it */
    size_t kept;
    int64_t retry_after_ms;     /* a Retry-After's delay, + 1 (0: none, or unreadable) */
    char err[200];              /* why it is malformed */
} h1_answer;

/* A Retry-After value, v[0..n): delay-seconds or an HTTP-date (IMF-fixdate),
 * as ms from now_s (>= 0, a delay past H1_RETRY_AFTER_MAX_S saturated to
 * it), or -1 when it is neither. */
#define H1_RETRY_AFTER_MAX_S INT64_C(100000000000)
int64_t h1_retry_after(const char *v, size_t n, int64_t now_s);

/* Read what has arrived, data[0..len): 1 when the answer is complete, 0 when
 * more must come, -1 when it is malformed (a->err). *used: the bytes
 * consumed; the rest (a part head or line) must be given again, with what
 * follows it. */
int h1_answer_parse(h1_answer *a, const char *data, size_t len, size_t *used);

/* 1 when a final answer's head has been read (its status is known). */
int h1_answer_has_status(const h1_answer *a);

#endif
