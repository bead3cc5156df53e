/* cbtls.c -- see cbtls.h. */
#include "delivery/cbtls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/log.h"
#include "base/util.h"

/* The TLS settings of callbacks to one host (or to any, for the [callback]
 * keys'). */
typedef struct cbtls_prof {
    char host[64];              /* "": every host without a profile of its own */
    X509_STORE *store;          /* NULL: libcurl's (the system's) */
    X509 *cert;                 /* client certificate, NULL: none */
    EVP_PKEY *key;
    STACK_OF(X509) *chain;      /* the certificates after it in client_cert */
    long tls_min;               /* CURL_SSLVERSION_TLSv1_2 or _3 */
    int insecure;               /* certificates not verified ([host:NAME] only) */
} cbtls_prof;

/* Where a profile's settings come from: the [callback] keys, with those a
 * [host:NAME] section gives in their place. key: how errors name a key
 * ("callback." or "[host:NAME] "). */
typedef struct cbtls_src {
    const char *ca_file, *ca_path, *client_cert, *client_key, *client_key_password;
    const char *tls_min_version;
    int ca_system, insecure;
    const char *pw_key;         /* how to name the passphrase in errors */
    const char *pw_hint;        /* and where else it may be given */
    char key[96];
} cbtls_src;

struct cbtls {
    cbtls_prof def;
    cbtls_prof *hosts;          /* [host:NAME] */
    int nhosts;
    char *proxy, *no_proxy;
    char proxy_at[300];         /* " to HOST port PORT", as libcurl names a failed connect */
};

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

/* OpenSSL's reason for the last failure, its queue emptied. */
static const char *cbtls_ossl_reason(char *buf, size_t len)
{
    unsigned long e = ERR_peek_last_error();
    if (e) ERR_error_string_n(e, buf, len);
    else snprintf(buf, len, "%s", strerror(errno));
    ERR_clear_error();
    return buf;
}

/* A readable regular file (or directory, dir set): 0, else -1 + err. */
static int cbtls_check_path(const cbtls_src *src, const char *key, const char *path, int dir,
                            char *err, size_t errlen)
{
    struct stat sb;
    if (stat(path, &sb) != 0) FAIL("%s%s: %s: %s", src->key, key, path, strerror(errno));
    if (dir ? !S_ISDIR(sb.st_mode) : !S_ISREG(sb.st_mode))
        FAIL("%s%s: %s: not a %s", src->key, key, path, dir ? "directory" : "regular file");
    return 0;
fail:
    return -1;
}

/* The CA certificates of a PEM file into the store: their count, or -1 +
 * err (none in the file is an error: a typo'd path to the wrong file must not
 * pass silently). */
static int cbtls_load_cas(X509_STORE *st, const cbtls_src *src, const char *path, char *err,
                          size_t errlen)
{
    char why[200];
    int n = 0;
    BIO *b = NULL;
    if (cbtls_check_path(src, "ca_file", path, 0, err, errlen) != 0) return -1;
    if (!(b = BIO_new_file(path, "r")))
        FAIL("%sca_file: %s: %s", src->key, path, cbtls_ossl_reason(why, sizeof(why)));
    STACK_OF(X509_INFO) *infos = PEM_X509_INFO_read_bio(b, NULL, NULL, NULL);
    if (!infos) FAIL("%sca_file: %s: not PEM certificates (%s)", src->key, path,
                     cbtls_ossl_reason(why, sizeof(why)));
    for (int i = 0; i < sk_X509_INFO_num(infos); i++) {
        X509_INFO *xi = sk_X509_INFO_value(infos, i);
        if (xi->x509 && X509_STORE_add_cert(st, xi->x509) == 1) n++;
    }
    sk_X509_INFO_pop_free(infos, X509_INFO_free);
    ERR_clear_error();
    if (n == 0) FAIL("%sca_file: %s: holds no PEM certificate", src->key, path);
    BIO_free(b);
    return n;
fail:
    BIO_free(b);
    return -1;
}

/* The trust store: the system's CAs (as libcurl finds them) unless
 * ca_system is off, plus ca_file and ca_path. */
static X509_STORE *cbtls_store(const cbtls_src *cfg, char *err, size_t errlen)
{
    char why[200];
    X509_STORE *st = X509_STORE_new();
    log_assert(st);
    if (!cfg->ca_system && !cfg->ca_file[0] && !cfg->ca_path[0])
        FAIL("%sca_system: false needs ca_file or ca_path (nothing would be trusted)", cfg->key);
    if (cfg->ca_system) {
        CURL *e = curl_easy_init();
        char *file = NULL, *dir = NULL;
        log_assert(e);
        curl_easy_getinfo(e, CURLINFO_CAINFO, &file);
        curl_easy_getinfo(e, CURLINFO_CAPATH, &dir);
        int ok = (file || dir) ? X509_STORE_load_locations(st, file, dir)
                               : X509_STORE_set_default_paths(st);
        curl_easy_cleanup(e);
        if (!ok) FAIL("%sca_system: the system's CA store cannot be read (%s); set "
                      "ca_system = false and give ca_file", cfg->key,
                      cbtls_ossl_reason(why, sizeof(why)));
    }
    if (cfg->ca_file[0] && cbtls_load_cas(st, cfg, cfg->ca_file, err, errlen) < 0) goto fail;
    if (cfg->ca_path[0]) {
        if (cbtls_check_path(cfg, "ca_path", cfg->ca_path, 1, err, errlen) != 0) goto fail;
        if (!X509_STORE_load_locations(st, NULL, cfg->ca_path))
            FAIL("%sca_path: %s: %s", cfg->key, cfg->ca_path, cbtls_ossl_reason(why, sizeof(why)));
    }
    /* as libcurl sets its own store */
    X509_STORE_set_flags(st, X509_V_FLAG_TRUSTED_FIRST | X509_V_FLAG_PARTIAL_CHAIN);
    return st;
fail:
    X509_STORE_free(st);
    return NULL;
}

typedef struct cbtls_pw {
    const char *pw;
    int asked;                  /* the key is encrypted */
} cbtls_pw;

static int cbtls_password(char *buf, int size, int rwflag, void *u)
{
    cbtls_pw *p = u;
    const char *pw = p->pw;
    int n = (int)strlen(pw);
    (void)rwflag;
    p->asked = 1;
    if (n > size) return -1;
    memcpy(buf, pw, (size_t)n);
    return n;
}

/* The client certificate, its chain and its key, checked to belong together. */
static int cbtls_identity(cbtls_prof *t, const cbtls_src *cfg, char *err, size_t errlen)
{
    char why[200];
    const char *keyfile = cfg->client_key[0] ? cfg->client_key : cfg->client_cert;
    const char *keyname = cfg->client_key[0] ? "client_key" : "client_cert";
    BIO *b = NULL;
    if (cbtls_check_path(cfg, "client_cert", cfg->client_cert, 0, err, errlen) != 0) return -1;
    if (!(b = BIO_new_file(cfg->client_cert, "r")) ||
        !(t->cert = PEM_read_bio_X509(b, NULL, NULL, NULL)))
        FAIL("%sclient_cert: %s: no PEM certificate (%s)", cfg->key, cfg->client_cert,
             cbtls_ossl_reason(why, sizeof(why)));
    t->chain = sk_X509_new_null();
    log_assert(t->chain);
    for (X509 *c; (c = PEM_read_bio_X509(b, NULL, NULL, NULL));) sk_X509_push(t->chain, c);
    ERR_clear_error();
    BIO_free(b);
    b = NULL;
    if (cbtls_check_path(cfg, keyname, keyfile, 0, err, errlen) != 0) return -1;
    if (!(b = BIO_new_file(keyfile, "r")))
        FAIL("%s%s: %s: %s", cfg->key, keyname, keyfile, cbtls_ossl_reason(why, sizeof(why)));
    /* the password callback answers "" when none is set: an encrypted key
     * then fails to decrypt rather than prompting on a terminal */
    cbtls_pw pw = {cfg->client_key_password, 0};
    t->key = PEM_read_bio_PrivateKey(b, NULL, cbtls_password, &pw);
    if (!t->key) {
        int bad_pw = pw.asked;
        if (bad_pw && !cfg->client_key_password[0])
            FAIL("%s%s: %s: the key is encrypted; give its passphrase as %s%s", cfg->key, keyname,
                 keyfile, cfg->pw_key, cfg->pw_hint);
        if (bad_pw) FAIL("%s: does not decrypt %s", cfg->pw_key, keyfile);
        FAIL("%s%s: %s: no PEM private key (%s)", cfg->key, keyname, keyfile,
             cbtls_ossl_reason(why, sizeof(why)));
    }
    BIO_free(b);
    b = NULL;
    if (X509_check_private_key(t->cert, t->key) != 1)
        FAIL("%s%s: %s: not the key of the certificate in %s", cfg->key, keyname, keyfile,
             cfg->client_cert);
    ERR_clear_error();
    return 0;
fail:
    BIO_free(b);
    ERR_clear_error();
    return -1;
}

/* The proxy URL, with its host and port (given: libcurl's default port
 * for a proxy, 1080, surprises more than it helps). */
static int cbtls_proxy(cbtls *t, const char *url, char *err, size_t errlen)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *path = NULL;
    int rc = -1;
    log_assert(u);
    if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK)
        FAIL("callback.proxy: not a valid URL");
    if (curl_url_get(u, CURLUPART_PORT, &port, 0) != CURLUE_OK)
        FAIL("callback.proxy: give the port (scheme://host:port)");
    if (curl_url_get(u, CURLUPART_PATH, &path, 0) == CURLUE_OK && strcmp(path, "/") != 0)
        FAIL("callback.proxy: no path after host:port");
    t->proxy = xstrdup(url);
    snprintf(t->proxy_at, sizeof(t->proxy_at), " to %s port %s ", host, port);
    rc = 0;
fail:
    curl_free(host);
    curl_free(port);
    curl_free(path);
    curl_url_cleanup(u);
    return rc;
}

/* One profile from its settings. */
static int cbtls_prof_init(cbtls_prof *p, const cbtls_src *src, char *err, size_t errlen)
{
    p->tls_min = strcmp(src->tls_min_version, "1.3") == 0 ? CURL_SSLVERSION_TLSv1_3
                                                          : CURL_SSLVERSION_TLSv1_2;
    p->insecure = src->insecure;
    if ((src->ca_file[0] || src->ca_path[0] || !src->ca_system) &&
        !(p->store = cbtls_store(src, err, errlen)))
        return -1;
    if (src->client_cert[0] && cbtls_identity(p, src, err, errlen) != 0) return -1;
    return 0;
}

static void cbtls_prof_clear(cbtls_prof *p)
{
    X509_STORE_free(p->store);
    X509_free(p->cert);
    EVP_PKEY_free(p->key);
    sk_X509_pop_free(p->chain, X509_free);
}

/* The settings of host h: its own keys where given, the [callback] ones
 * elsewhere. -1 + err when its passphrase variable is missing. */
static int cbtls_host_src(const config *cfg, const config_host *h, cbtls_src *src, char *err,
                          size_t errlen)
{
#define PICK(field) (h->set & (1u << config_host_key(#field)) ? h->field : cfg->field)
    src->ca_file = PICK(ca_file);
    src->ca_path = PICK(ca_path);
    src->ca_system = (int)PICK(ca_system);
    src->client_cert = PICK(client_cert);
    /* a host's own certificate comes with its own key (or its file's) */
    src->client_key = h->set & (1u << config_host_key("client_cert")) ? h->client_key
                                                                       : PICK(client_key);
    src->tls_min_version = PICK(tls_min_version);
#undef PICK
    src->insecure = (int)h->insecure_skip_verify;
    snprintf(src->key, sizeof(src->key), "[host:%s] ", h->name);
    src->client_key_password = cfg->client_key_password;
    src->pw_key = "callback.client_key_password";
    src->pw_hint = "";
    if (h->client_key_password_env[0]) {
        src->pw_key = h->client_key_password_env;
        if (!(src->client_key_password = getenv(h->client_key_password_env))) {
            snprintf(err, errlen, "[host:%s] client_key_password_env: %s is not set in the "
                     "environment", h->name, h->client_key_password_env);
            return -1;
        }
    } else if (h->set & (1u << config_host_key("client_cert"))) {
        src->client_key_password = "";  /* the [callback] one is another key's */
        src->pw_key = "a variable named by client_key_password_env";
    }
    return 0;
}

int cbtls_create(const config *cfg, cbtls **out, char *err, size_t errlen)
{
    cbtls *t = xcalloc(1, sizeof(*t));
    cbtls_src src = {cfg->ca_file, cfg->ca_path, cfg->client_cert, cfg->client_key,
                     cfg->client_key_password, cfg->tls_min_version, (int)cfg->ca_system, 0,
                     "callback.client_key_password", " (TICKD_CALLBACK_CLIENT_KEY_PASSWORD)",
                     "callback."};
    *out = NULL;
    if (cbtls_prof_init(&t->def, &src, err, errlen) != 0) goto fail;
    if (cfg->nhosts) t->hosts = xcalloc((size_t)cfg->nhosts, sizeof(*t->hosts));
    for (int i = 0; i < cfg->nhosts; i++, t->nhosts++) {
        const config_host *h = &cfg->hosts[i];
        util_copy(t->hosts[i].host, sizeof(t->hosts[i].host), h->name);
        if (cbtls_host_src(cfg, h, &src, err, errlen) != 0 ||
            cbtls_prof_init(&t->hosts[i], &src, err, errlen) != 0) {
            t->nhosts++;
            goto fail;
        }
        if (h->insecure_skip_verify)
            log_warn("[host:%s] insecure_skip_verify: the certificates of https:// callbacks to "
                     "%s are NOT verified (anyone on the path can read and change them)",
                     h->name, h->name);
    }
    if (cfg->proxy[0] && cbtls_proxy(t, cfg->proxy, err, errlen) != 0) goto fail;
    if (cfg->no_proxy[0]) t->no_proxy = xstrdup(cfg->no_proxy);
    if (!t->def.store && !t->def.cert && !t->proxy && !t->no_proxy && !t->nhosts &&
        t->def.tls_min == CURL_SSLVERSION_TLSv1_2) {
        cbtls_free(t);
        return 0;
    }
    *out = t;
    return 0;
fail:
    cbtls_free(t);
    return -1;
}

void cbtls_free(cbtls *t)
{
    if (!t) return;
    cbtls_prof_clear(&t->def);
    for (int i = 0; i < t->nhosts; i++) cbtls_prof_clear(&t->hosts[i]);
    free(t->hosts);
    free(t->proxy);
    free(t->no_proxy);
    free(t);
}

int cbtls_proxied(const cbtls *t)
{
    return t && t->proxy;
}

/* Called by libcurl for each TLS connection, after it has set up its own
 * context: the prepared store and identity replace its defaults (each only
 * takes a reference, so nothing is parsed per connection). */
static CURLcode cbtls_ctx_cb(CURL *curl, void *sslctx, void *parm)
{
    const cbtls_prof *t = parm;
    SSL_CTX *ctx = sslctx;
    (void)curl;
    if (t->store) {
        X509_STORE_up_ref(t->store);
        SSL_CTX_set_cert_store(ctx, t->store);
    }
    if (t->cert && (SSL_CTX_use_certificate(ctx, t->cert) != 1 ||
                    SSL_CTX_use_PrivateKey(ctx, t->key) != 1 ||
                    (sk_X509_num(t->chain) && SSL_CTX_set1_chain(ctx, t->chain) != 1))) {
        ERR_clear_error();
        return CURLE_SSL_CERTPROBLEM;
    }
    return CURLE_OK;
}

/* The options of profile p on e. */
static void cbtls_prof_apply(const cbtls_prof *p, CURL *e)
{
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, p->insecure ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, p->insecure ? 0L : 2L);
    curl_easy_setopt(e, CURLOPT_SSLVERSION, p->tls_min);
    curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, p->store || p->cert ? cbtls_ctx_cb : NULL);
    curl_easy_setopt(e, CURLOPT_SSL_CTX_DATA, (void *)p);
    /* with a store of its own (which holds the system's CAs unless
     * ca_system is off), libcurl must not read its CA bundle for every new
     * connection only to have it replaced: that cost about 50 ms of CPU a
     * connection, most of an https:// callback's */
    if (p->store) {
        curl_easy_setopt(e, CURLOPT_CAINFO, NULL);
        curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    }
}

void cbtls_easy(const cbtls *t, CURL *e)
{
    /* never from a task: verification stays on */
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!t) return;
    cbtls_prof_apply(&t->def, e);
    if (t->proxy) curl_easy_setopt(e, CURLOPT_PROXY, t->proxy);
    if (t->no_proxy) curl_easy_setopt(e, CURLOPT_NOPROXY, t->no_proxy);
}

void cbtls_host(const cbtls *t, CURL *e, const char *url)
{
    if (!t || !t->nhosts) return;
    /* the host of scheme://[user@]host[:port]/...: a name, or [v6] */
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t alen = strcspn(p, "/?#");
    const char *at = memchr(p, '@', alen);
    if (at) alen -= (size_t)(at + 1 - p), p = at + 1;
    const char *rb = *p == '[' ? memchr(p, ']', alen) : NULL;
    size_t hlen = rb ? (size_t)(rb - p) + 1 : strcspn(p, ":/?#");
    if (hlen > alen) hlen = alen;
    const cbtls_prof *prof = &t->def;
    for (int i = 0; i < t->nhosts; i++)
        if (strlen(t->hosts[i].host) == hlen && strncasecmp(t->hosts[i].host, p, hlen) == 0)
            prof = &t->hosts[i];
    cbtls_prof_apply(prof, e);
}

/* The failed check of a certificate the receiver showed. */
static const char *cbtls_verify_reason(long vr)
{
    switch (vr) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
        return "expired: the receiver's certificate has expired";
    case X509_V_ERR_CERT_NOT_YET_VALID:
        return "not yet valid: the receiver's certificate is not valid yet";
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_UNTRUSTED:
        return "unknown CA: the receiver's certificate is not signed by a trusted CA "
               "(trust it with callback.ca_file)";
    case X509_V_ERR_CERT_REVOKED:
        return "revoked: the receiver's certificate is revoked";
    default:
        return NULL;
    }
}

/* With TLS 1.3 a receiver checks the client's certificate after the
 * handshake has ended on the client's side: its refusal may arrive as the
 * request is written or its answer read, the alert itself lost. A TLS
 * connection closed then, before any answer, is said to be that. */
static const char *cbtls_closed_after_handshake(CURL *e)
{
    char *scheme = NULL;
    curl_off_t tls_us = 0;
    long code = 0;
    curl_easy_getinfo(e, CURLINFO_SCHEME, &scheme);
    curl_easy_getinfo(e, CURLINFO_APPCONNECT_TIME_T, &tls_us);
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &code);
    if (!scheme || strcasecmp(scheme, "https") != 0 || tls_us <= 0 || code) return NULL;
    return "connection closed by the receiver right after the handshake, as one does that "
           "wants a client certificate or refuses tickd's (callback.client_cert)";
}

void cbtls_describe(const cbtls *t, CURL *e, CURLcode rc, const char *errbuf, char *out,
                    size_t outlen)
{
    const char *what = NULL, *proxy = NULL;
    char other[160];
    long vr = X509_V_OK, tunnel = 0;
    /* a failure of the proxy, not of the receiver behind it */
    if (t && t->proxy) {
        curl_easy_getinfo(e, CURLINFO_HTTP_CONNECTCODE, &tunnel);
        if (rc == CURLE_COULDNT_RESOLVE_PROXY || rc == CURLE_PROXY ||
            (rc == CURLE_COULDNT_CONNECT && strstr(errbuf, t->proxy_at)))
            proxy = "proxy unreachable (callback.proxy)";
        else if (tunnel >= 300)
            proxy = "proxy refused the tunnel (callback.proxy)";
    }
    if (proxy) {
        if (tunnel >= 300) snprintf(other, sizeof(other), "%s: HTTP %ld", proxy, tunnel);
        else snprintf(other, sizeof(other), "%s", proxy);
        snprintf(out, outlen, "%s: %s%s%s", other, curl_easy_strerror(rc), errbuf[0] ? ": " : "",
                 errbuf);
        return;
    }
    switch (rc) {
    case CURLE_PEER_FAILED_VERIFICATION:
        curl_easy_getinfo(e, CURLINFO_SSL_VERIFYRESULT, &vr);
        /* libcurl checks the name itself, once OpenSSL has accepted the chain */
        if (strstr(errbuf, "target host name"))
            what = "name mismatch: the receiver's certificate is not for this host";
        else if (!(what = cbtls_verify_reason(vr))) {
            snprintf(other, sizeof(other), "certificate rejected: %s",
                     X509_verify_cert_error_string(vr));
            what = other;
        }
        break;
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
        /* the receiver's alert about the certificate tickd showed (or did not) */
        if (strstr(errbuf, "certificate required") || strstr(errbuf, "bad certificate") ||
            strstr(errbuf, "alert unknown ca") || strstr(errbuf, "certificate unknown"))
            what = "client certificate refused: the receiver wants a client certificate it "
                   "trusts (callback.client_cert)";
        else if (rc == CURLE_SSL_CONNECT_ERROR)
            what = "handshake failed";
        else
            what = cbtls_closed_after_handshake(e);
        break;
    case CURLE_GOT_NOTHING:
        what = cbtls_closed_after_handshake(e);
        break;
    case CURLE_SSL_CERTPROBLEM:
        what = "client certificate unusable";
        break;
    default:
        break;
    }
    snprintf(out, outlen, "%s%s%s%s%s", what ? "TLS " : "", what ? what : "",
             what ? ": " : "", curl_easy_strerror(rc), errbuf[0] ? ": " : "");
    size_t n = strlen(out);
    if (errbuf[0] && n < outlen) snprintf(out + n, outlen - n, "%s", errbuf);
}
