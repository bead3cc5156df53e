/* http_request.h -- the parser of HTTP/1.1 requests under tickd's API: fed
 * the bytes of a request as they arrive, in any split, it hands out the
 * head (method, target, version, fields), then the body, or the refusal the
 * server answers with. It knows no socket and no event loop: http_server.c
 * reads, calls it, and answers; tests and the fuzzer feed it bytes.
 *
 * Strict, as RFC 9112 asks of a server that may sit behind a proxy: lines
 * end with CRLF (a bare LF or CR is refused as soon as it arrives); empty
 * lines before the request line are skipped; the method a token; the target
 * in origin-form or absolute-form (http:// or https://); HTTP/1.0 or 1.1;
 * field names tokens directly followed by ':' (no obs-fold), values without
 * control characters (a tab and obs-text are fine); exactly one Host in
 * HTTP/1.1, never two, host[:port]; Content-Length 1*DIGIT (a list or
 * repeated fields only with the same value), never with Transfer-Encoding,
 * whose codings across its fields must be exactly one final chunked
 * (HTTP/1.1 only); chunk sizes 1*HEXDIG of at most 16 digits, chunk
 * extensions and trailer fields checked byte by byte and bounded; Expect
 * only 100-continue. Refusals: 400 (malformed), 413 (a body over max_body),
 * 417 (Expect), 431 (a head over HTTP_MAX_HEAD or with more than
 * HTTP_MAX_FIELDS fields), 501 (a coding before the final chunked).
 *
 * In place, without a copy: the caller owns the buffer, which holds the
 * request from its first byte (and may hold what follows it). The parser
 * may rewrite it: empty lines before the request line are taken out, the
 * method, the target and every field name and value are NUL-terminated
 * where they lie, and a chunked body is decoded as it comes, its framing
 * dropped, so that the buffer holds the head, the decoded data and what
 * was not read yet (*len shrinks). Between calls the caller appends what
 * arrives after buf[*len) and may move the buffer: the parser keeps offsets,
 * never pointers. However the bytes are split, the head is scanned for its
 * end once (then read once more, whole) and a chunked body is decoded with
 * each byte looked at once; any split gives the same result. */
#ifndef TICKD_HTTP_REQUEST_H
#define TICKD_HTTP_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#define HTTP_MAX_HEAD (16 * 1024)   /* request line + fields, with the final CRLF */
#define HTTP_MAX_FIELDS 64
#define HTTP_MAX_CHUNK_EXT 1024     /* bytes of extensions on one chunk-size line */
#define HTTP_MAX_TRAILER 4096       /* bytes of the trailer section */

/* A refusal: status line and the JSON error's code and message
 * ("field: reason"), as the server answers it. */
typedef struct http_refusal {
    int status;
    const char *reason, *code;
    char msg[256];
} http_refusal;

/* What http_request_parse says. */
enum {
    HTTP_REQ_ERROR = -1,   /* refused (p->refusal); the connection must close */
    HTTP_REQ_MORE = 0,     /* more bytes must come */
    HTTP_REQ_HEAD = 1,     /* the head is read, its framing known: call again for the body */
    HTTP_REQ_DONE = 2      /* the request is complete (p->len bytes of buf) */
};

/* Where the parser is. */
enum { HTTP_PHASE_HEAD, HTTP_PHASE_BODY, HTTP_PHASE_CHUNKED, HTTP_PHASE_DONE, HTTP_PHASE_ERROR };

typedef struct http_request {
    size_t max_body;                 /* a longer body is refused (413); kept by reset */
    int phase;
    size_t scan;                     /* bytes of the head already scanned */
    /* the head, once read: offsets into the buffer, NUL-terminated there */
    uint32_t method, target;
    int root;                        /* absolute-form target with an empty path: "/" */
    int http10;                      /* HTTP/1.0 */
    int head;                        /* the method is HEAD (known from the request line on) */
    int keep_alive;                  /* the connection goes on after this request */
    int expect;                      /* Expect: 100-continue came */
    int chunked;                     /* the body is chunked (decoded in place as it comes) */
    size_t body, body_len;           /* offset and length of the (decoded) body */
    /* bytes of the buffer this request spans: with a Content-Length, known
     * from the head on (the buffer must grow to hold it); chunked, at the end */
    size_t len;
    /* chunked body: the decoded bytes go to body + cout, the next byte to
     * read is at cpos */
    int cst;
    uint64_t csize;                  /* chunk size read, then bytes of it still to come */
    size_t cpos, cout, cext, ctrail;
    int nfields;
    http_refusal refusal;            /* why, after HTTP_REQ_ERROR */
    uint32_t field[HTTP_MAX_FIELDS][2];   /* name, value offsets */
    uint16_t name_len[HTTP_MAX_FIELDS];   /* each name's length */
} http_request;
_Static_assert(HTTP_MAX_HEAD < 65536, "a field name's length fits name_len");

/* A parser for a connection's first request; bodies over max_body bytes
 * are refused. */
void http_request_init(http_request *p, size_t max_body);
/* Ready for the next request, once the caller has taken the last one off
 * the front of its buffer. */
void http_request_reset(http_request *p);

/* Read what has arrived of the request, buf[0..*len): HTTP_REQ_MORE,
 * HTTP_REQ_HEAD once (the head is read: the fields may be looked at, and a
 * gate may refuse the request before its body is read), then HTTP_REQ_MORE
 * until HTTP_REQ_DONE; or HTTP_REQ_ERROR. Either end is said again by every
 * later call until http_request_reset. The buffer is rewritten in place
 * and *len may shrink (above). After HTTP_REQ_DONE the body is
 * buf[p->body..p->body + p->body_len) and the next request begins at
 * buf[p->len]; the caller NUL-terminates the body if it needs it to be
 * (a chunked one is). */
int http_request_parse(http_request *p, char *buf, size_t *len);

/* The target: "/v1/tasks?x=1"; of an absolute-form target, the path and
 * query, "/" when the path is empty. */
const char *http_request_target(const http_request *p, const char *buf);
/* A field by name (case-insensitive), the first of repeated ones; NULL if
 * absent. */
const char *http_request_header(const http_request *p, const char *buf, const char *name);
/* How many times the field `name` came. */
int http_request_header_count(const http_request *p, const char *buf, const char *name);

#endif
