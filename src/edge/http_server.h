/* http_server.h -- the HTTP/1.1 server under tickd's API, on the main event loop.
 *
 * Small on purpose: keep-alive, pipelining (answered in order, one request
 * of a connection at a time), Content-Length and chunked request bodies,
 * Expect: 100-continue, HEAD. Each connection reads with one read() and
 * answers with one write(); nothing is copied between the two but the
 * answer, and a steady keep-alive connection costs no epoll_ctl per request.
 *
 * Requests are read by the parser of edge/http_request.h, in place in the
 * connection's buffer (strict, as RFC 9112 asks of a server that may sit
 * behind a proxy; chunked bodies decoded as they come, each byte looked at
 * once); this module keeps the connections, their time limits, the gate,
 * pipelining and the answers. Targets in origin-form or absolute-form
 * (http_target gives the path).
 *
 * Every request handed to the handler must get exactly one http_reply(),
 * now or later from the same loop; if its client went away meanwhile the
 * reply is dropped and the request freed then. The server answers for
 * itself, with a JSON error and by closing the connection: a malformed
 * request (400), a body over max_body (413), a head over 16 KiB or with too
 * many fields (431), a coding before the final chunked (501), an Expect
 * other than 100-continue (417), a head not complete within header_ms of
 * its first byte or a body not within body_ms of its head (408).
 *
 * Bounded: a connection is not read while its unsent answers pass 64 KiB
 * or, with a request at the handler, while a further 16 KiB waits; at
 * max_conns connections open, accepting pauses until one closes. A
 * connection with no request at the handler is closed after idle_ms without
 * a byte. */
#ifndef TICKD_HTTP_H
#define TICKD_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "edge/http_request.h"

struct event_base;
typedef struct http_server http_server;
typedef struct http_req http_req;

typedef void http_handler(http_req *req, void *arg);

/* A refusal by the gate (below) is an http_refusal (edge/http_request.h):
 * status line and the JSON error's code and message ("field: reason"). */

/* Called once a request's head is read, before its body (and before any
 * "100 Continue"): 0 lets it go on to the handler; otherwise `out` is filled
 * and the server answers it as it does its own errors (JSON, connection
 * closed), never reading the body. The gate may http_add_header(). */
typedef int http_gate(http_req *req, void *arg, http_refusal *out);

/* Listen on host:port ("127.0.0.1:0" picks a free port; a name is resolved;
 * NULL: no listener, for tests that hand in sockets with http_server_adopt).
 * Limits start at 10,000 connections, header_ms 10 s, body_ms 30 s.
 * Returns NULL + err. */
http_server *http_server_new(struct event_base *base, const char *listen, size_t max_body,
                             int64_t idle_ms, http_handler *handler, void *arg, char *err,
                             size_t errlen);
/* Log a line per answered request (log_access). */
void http_server_set_access_log(http_server *s, int on);

/* Connections open now. */
int http_server_connections(const http_server *s);

/* At most max_conns connections open; a request's head must be read within
 * header_ms of its first byte, its body within body_ms of the head. */
void http_server_set_limits(http_server *s, int max_conns, int64_t header_ms, int64_t body_ms);
/* Serve an already connected socket as if accepted (tests, fuzzing); the
 * server owns fd from then on. 0, or -1 (fd not taken). */
int http_server_adopt(http_server *s, int fd);
/* Put a gate before the handler (it gets the handler's arg). */
void http_server_set_gate(http_server *s, http_gate *gate);
/* The port actually bound. */
int http_server_port(const http_server *s);
/* Stop accepting; connections already open go on. */
void http_server_stop_accepting(http_server *s);
/* Close everything; requests still unanswered must not be answered after. */
void http_server_free(http_server *s);

/* The request: method ("GET"; HEAD is given as GET, answered without the
 * body), target ("/v1/tasks?x=1"; of an absolute-form target, the path
 * and query, "/" when the path is empty), a header
 * by name (case-insensitive; NULL if absent; the first of repeated ones),
 * the body (chunked bodies already decoded; NUL-terminated). The pointers
 * are valid while the handler runs: copy what is needed later. */
const char *http_method(const http_req *r);
const char *http_target(const http_req *r);
const char *http_header(const http_req *r, const char *name);
/* How many times the field `name` came. */
int http_header_count(const http_req *r, const char *name);
const char *http_body(const http_req *r, size_t *len);
/* For the gate: whether a body follows the head (chunked, or a Content-Length
 * over 0). */
int http_body_coming(const http_req *r);

/* Add a header to the answer ("Allow"); before http_reply. */
void http_add_header(http_req *r, const char *name, const char *value);

/* Answer with status, reason and a body of content type `type` (NULL and
 * len 0: no body). The request is gone after this call. */
void http_reply(http_req *r, int status, const char *reason, const char *type,
                const char *body, size_t len);

#endif
