/* listen.h -- tickctl listen: a local HTTP receiver for trying tickd out.
 *
 * It prints each request as it arrives (method, target, headers, body, and
 * the lateness: arrival time minus the due time tickd sends in
 * tickd-scheduled-at), answers with the chosen status, and with secrets
 * given verifies the Standard Webhooks signature (webhook_verify), answering
 * 401 to a request whose signature is invalid.
 *
 * Its bytes come from outside: libevent's evhttp parses them, with the head
 * bounded to LISTEN_HEAD_MAX bytes, the body to LISTEN_BODY_MAX and each
 * connection's silence to LISTEN_TIMEOUT_S; a malformed request is answered
 * (or the connection closed) by evhttp and the receiver goes on. */
#ifndef TICKCTL_LISTEN_H
#define TICKCTL_LISTEN_H

#include "delivery/webhook.h"

#define LISTEN_HEAD_MAX (16 * 1024)
#define LISTEN_BODY_MAX (1024 * 1024)
#define LISTEN_TIMEOUT_S 10
#define LISTEN_SHOW_MAX (64 * 1024)   /* body bytes printed of one request */

typedef struct listen_opts {
    const char *bind;      /* address to listen on */
    int port;              /* 0: a free port, printed */
    int status;            /* the answer to a request not refused */
    const webhook_keys *keys;  /* the secrets; NULL: no verification */
    int json;              /* a JSON object a request, a line each */
    long count;            /* stop after this many requests; 0: on a signal */
} listen_opts;

/* Serve until SIGINT or SIGTERM, or `count` requests answered. Returns the
 * exit code: CTL_INVALID_SIG when any request's signature was invalid,
 * CTL_OK otherwise; CTL_API when the port cannot be had (said on stderr). */
int listen_run(const listen_opts *o);

#endif
