/* h1.h -- a lean HTTP/1.1 client for the callbacks to plain http:// URLs.
 *
 * libcurl spends about 86,000 instructions on one callback over a kept
 * connection (callgrind): it builds the request head one byte at a time
 * through its own printf, searches its connection cache and checks every
 * header it might add against the task's. In a burst that was most of
 * tickd's CPU. For http:// without a proxy the dispatch workers speak
 * HTTP/1.1 themselves: the request is written in one send(), the answer's
 * status line and framing (Content-Length, chunked, or up to the close) are
 * read, its body is dropped, and the connection is kept for the next callback
 * to the same host. Names are resolved with libevent's evdns (the hosts file,
 * then the servers of resolv.conf) and kept for 60 s. https://, proxies and
 * URLs with credentials stay with libcurl.
 *
 * One h1_client per event loop (thread); nothing here is thread-safe. */
#ifndef TICKD_H1_H
#define TICKD_H1_H

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct sockaddr;
typedef struct h1_client h1_client;
typedef struct h1_host h1_host;
typedef struct h1_call h1_call;

/* The error of an answer whose head came and whose body was cut short: the
 * receiver has answered, its status stands. Both callback clients say it so. */
#define H1_CUT_TIMEOUT "HTTP %ld, but the answer's body was cut off by the timeout (%lld ms)"
#define H1_CUT_CLOSED "HTTP %ld, but the connection closed before the answer's body ended"

/* A call ended: status is the HTTP status of the final answer, or 0 with err
 * saying why there is none (timeout, connection, malformed answer). A status
 * with err: the head came but its body was cut short, by the timeout or the
 * connection's end (H1_CUT_TIMEOUT, H1_CUT_CLOSED). flags:
 * H1_LOCAL when the call failed for a reason of this process's own (out of
 * descriptors, memory or local ports), not the host's; H1_TIMEOUT when it
 * ran out of time. body: the first
 * H1_KEEP_MAX bytes of a non-2xx answer's body, malloc'd, the callback's to
 * free (NULL: none). */
#define H1_LOCAL 1
#define H1_TIMEOUT 2 /* the call ran out of its timeout */
typedef void h1_done_fn(void *priv, long status, const char *err, int flags, char *body,
                        size_t body_len, int64_t retry_after_ms);

/* NULL when no resolver can be set up (the caller then uses libcurl). A kept
 * connection unused for keepalive_ms is closed. shared: base is a loop that
 * runs on after h1_client_free (else h1_client_free runs it once more, to
 * end the lookups still pending). */
h1_client *h1_client_new(struct event_base *base, int64_t keepalive_ms, int shared);
/* Every call must have ended or been aborted, every host freed. */
void h1_client_free(h1_client *c);
/* Naps its loop took so far while calls waited for their answers (the
 * loop needs at least three priorities: h1.c, h1_nap_cb). */
uint64_t h1_client_naps(const h1_client *c);

/* Asked before each connect, with the client's priv and the priv of the
 * call that needs the connection (NULL: a connection opened ahead,
 * h1_host_warm): 0 lets it go on, else the address is skipped (why: the
 * reason). A call whose every address was refused fails with that reason. */
typedef int h1_guard_fn(void *client_priv, void *call_priv, const struct sockaddr *sa, char *why,
                        size_t whylen);
void h1_client_set_guard(h1_client *c, h1_guard_fn *fn, void *client_priv);

/* The receiving host of url (scheme://authority), with its resolved address
 * and idle connections; NULL when url is not one this client takes. */
h1_host *h1_host_new(h1_client *c, const char *url);
void h1_host_free(h1_host *h);
/* 1 while h has calls waiting or connections kept or opening (NULL: 0). */
int h1_host_busy(const h1_host *h);
/* Open connections to h ahead of its calls, until it has want kept or
 * opening with no call on them (the calls that start meanwhile take those
 * first). Only a host whose address is known (an address in the URL, or a
 * lookup not yet expired): nothing is looked up for it. Each connect asks the
 * guard as a call's would; a connect that fails or is refused is dropped
 * without a word (the call that comes connects itself and says why). A
 * connection opened so is closed when unused for keepalive_ms, as a kept one.
 * Those opened ahead and not yet used hold at most a quarter of the
 * process's descriptors (RLIMIT_NOFILE; 4,096 at most): past that, none is. */
void h1_host_warm(h1_host *h, int want);

/* Call url (on h's host) with method, the header lines hdrs ("Name: value\r\n"
 * each; Host, User-Agent and Accept are added unless given) and body (NULL:
 * none; else sent with its Content-Length). timeout_ms bounds the whole call.
 * done runs once, later, from the event loop, unless the call is aborted. */
h1_call *h1_call_start(h1_host *h, const char *method, const char *url, const char *hdrs,
                       size_t hdrs_len, const char *body, size_t body_len, int64_t timeout_ms,
                       h1_done_fn *done, void *priv);
/* End a call without its done callback (its connection is closed). */
void h1_call_abort(h1_call *k);

#endif
