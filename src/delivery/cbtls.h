/* cbtls.h -- TLS and proxy settings of the callbacks made through libcurl
 * (https://, and everything when a proxy is configured), on OpenSSL.
 *
 * Read once at start from the [callback] keys (and per receiving host from
 * [host:NAME] sections, each key there overriding its [callback] namesake):
 * the CAs trusted besides (or
 * instead of) the system's (ca_file, ca_path, ca_system), the client
 * certificate presented to every https:// receiver (client_cert, client_key,
 * client_key_password), the lowest TLS version and the proxy. Every file is
 * read and checked at start, so a bad one stops tickd with an error naming its
 * key rather than failing each callback later. Certificates are always
 * verified, and nothing a task says can change that: only a [host:NAME]
 * section's insecure_skip_verify turns the checks off, for that host alone,
 * with a warning at start.
 *
 * The trust store and the client key are built once and shared by every
 * connection (SSL_CTX_set_cert_store, SSL_CTX_use_PrivateKey, through
 * CURLOPT_SSL_CTX_FUNCTION): a connection parses no file. After cbtls_create
 * the object is read-only and may be used from any thread. */
#ifndef TICKD_CBTLS_H
#define TICKD_CBTLS_H

#include <curl/curl.h>
#include <stddef.h>

#include "base/config.h"

typedef struct cbtls cbtls;

/* The settings of cfg's [callback] keys, files read and checked. *out is
 * NULL when nothing differs from libcurl's defaults (no proxy, the system's
 * CAs, no client certificate, TLS 1.2). 0, or -1 with "callback.key: reason"
 * in err. */
int cbtls_create(const config *cfg, cbtls **out, char *err, size_t errlen);
void cbtls_free(cbtls *t);

/* 1 when every callback must go through libcurl (a proxy is configured). */
int cbtls_proxied(const cbtls *t);

/* Set the options that never change on a new easy handle (t may be NULL). */
void cbtls_easy(const cbtls *t, CURL *e);

/* Set the TLS options of a transfer to url: those of its host's [host:NAME]
 * section, or the [callback] ones. Nothing to do (and nothing done) when no
 * host has a section. */
void cbtls_host(const cbtls *t, CURL *e, const char *url);

/* Why a transfer failed, whole: libcurl's message and its error buffer, and
 * for a TLS failure which check failed (unknown CA, expired, name mismatch,
 * handshake, client certificate refused); a failure of t's proxy says so. */
void cbtls_describe(const cbtls *t, CURL *e, CURLcode rc, const char *errbuf, char *out,
                    size_t outlen);

#endif
