/* netpolicy.c -- see netpolicy.h. */
#include "delivery/netpolicy.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/util.h"

/* One entry "addr[/bits]" of n bytes at s into c; 0 or -1 + why. */
static int np_entry(const char *s, size_t n, np_cidr *c, char *why, size_t whylen)
{
    char a[INET6_ADDRSTRLEN + 8];
    const char *slash = memchr(s, '/', n);
    size_t al = slash ? (size_t)(slash - s) : n;
    memset(c, 0, sizeof(*c));
    if (al == 0 || al >= sizeof(a)) {
        snprintf(why, whylen, "not an IPv4 or IPv6 address");
        return -1;
    }
    memcpy(a, s, al);
    a[al] = '\0';
    if (inet_pton(AF_INET, a, c->addr) == 1) {
        c->v6 = 0;
    } else if (inet_pton(AF_INET6, a, c->addr) == 1) {
        c->v6 = 1;
    } else {
        snprintf(why, whylen, "not an IPv4 or IPv6 address");
        return -1;
    }
    int max = c->v6 ? 128 : 32;
    c->bits = max;
    if (slash) {
        const char *p = slash + 1, *end = s + n;
        int bits = 0;
        if (p == end || end - p > 3) {
            snprintf(why, whylen, "prefix length must be 0..%d", max);
            return -1;
        }
        for (; p < end; p++) {
            if (*p < '0' || *p > '9') {
                snprintf(why, whylen, "prefix length must be 0..%d", max);
                return -1;
            }
            bits = bits * 10 + (*p - '0');
        }
        if (bits > max) {
            snprintf(why, whylen, "prefix length must be 0..%d", max);
            return -1;
        }
        c->bits = bits;
    }
    /* bits set past the prefix are a typo more often than a wish: say so */
    for (int i = c->bits; i < max; i++)
        if (c->addr[i / 8] & (0x80 >> (i % 8))) {
            snprintf(why, whylen, "address has bits set past the /%d prefix", c->bits);
            return -1;
        }
    return 0;
}

int netpolicy_parse(const char *key, const char *list, np_cidr **out, int *n,
                    char *err, size_t errlen)
{
    np_cidr *v = NULL;
    int cnt = 0, cap = 0;
    const char *p = list;
    *out = NULL;
    *n = 0;
    for (;;) {
        p += strspn(p, " \t");
        if (!*p) break;
        size_t len = strcspn(p, " \t");
        char why[96];
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            v = xrealloc(v, (size_t)cap * sizeof(*v));
        }
        if (np_entry(p, len, &v[cnt], why, sizeof(why)) != 0) {
            snprintf(err, errlen, "%s: \"%.*s\": %s", key, (int)(len > 60 ? 60 : len), p, why);
            free(v);
            return -1;
        }
        cnt++;
        p += len;
    }
    *out = v;
    *n = cnt;
    return 0;
}

int netpolicy_init(netpolicy *p, const char *deny, const char *allow, char *err, size_t errlen)
{
    memset(p, 0, sizeof(*p));
    if (netpolicy_parse("callback.deny", deny, &p->deny, &p->ndeny, err, errlen) != 0) return -1;
    if (netpolicy_parse("callback.allow", allow, &p->allow, &p->nallow, err, errlen) != 0) {
        netpolicy_free(p);
        return -1;
    }
    /* "allow" set to blanks only would allow nothing: that is a mistake */
    if (allow[strspn(allow, " \t")] == '\0' && allow[0]) {
        snprintf(err, errlen, "callback.allow: only blanks (leave it empty to allow all)");
        netpolicy_free(p);
        return -1;
    }
    return 0;
}

void netpolicy_free(netpolicy *p)
{
    free(p->deny);
    free(p->allow);
    free(p->self);
    memset(p, 0, sizeof(*p));
}

/* ---- matching ---------------------------------------------------------- */

/* An address in both forms: v4 (when it is one, or IPv4-mapped) and v6. */
typedef struct np_addr {
    int has4;
    uint8_t a4[4], a6[16];
    int port;
} np_addr;

static const uint8_t np_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static int np_addr_of(const struct sockaddr *sa, np_addr *o)
{
    memset(o, 0, sizeof(*o));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        o->has4 = 1;
        memcpy(o->a4, &s4->sin_addr, 4);
        memcpy(o->a6, np_mapped, 12);
        memcpy(o->a6 + 12, o->a4, 4);
        o->port = ntohs(s4->sin_port);
        return 0;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        memcpy(o->a6, &s6->sin6_addr, 16);
        if (memcmp(o->a6, np_mapped, 12) == 0) {
            o->has4 = 1;
            memcpy(o->a4, o->a6 + 12, 4);
        }
        o->port = ntohs(s6->sin6_port);
        return 0;
    }
    return -1;
}

static int np_match1(const np_cidr *c, const np_addr *a)
{
    const uint8_t *x;
    if (c->v6) x = a->a6;
    else if (a->has4) x = a->a4;
    else return 0;
    int full = c->bits / 8, rest = c->bits % 8;
    if (memcmp(x, c->addr, (size_t)full) != 0) return 0;
    if (rest && ((x[full] ^ c->addr[full]) & (0xff00 >> rest) & 0xff)) return 0;
    return 1;
}

static const np_cidr *np_match(const np_cidr *v, int n, const np_addr *a)
{
    for (int i = 0; i < n; i++)
        if (np_match1(&v[i], a)) return &v[i];
    return NULL;
}

static void np_cidr_str(const np_cidr *c, char *out, size_t outlen)
{
    char a[INET6_ADDRSTRLEN];
    inet_ntop(c->v6 ? AF_INET6 : AF_INET, c->addr, a, sizeof(a));
    snprintf(out, outlen, "%s/%d", a, c->bits);
}

static void np_addr_str(const np_addr *a, char *out, size_t outlen)
{
    if (a->has4) inet_ntop(AF_INET, a->a4, out, (socklen_t)outlen);
    else inet_ntop(AF_INET6, a->a6, out, (socklen_t)outlen);
}

static int np_check(const netpolicy *p, const np_addr *a, int self_check, char *why, size_t whylen)
{
    char as[INET6_ADDRSTRLEN], cs[INET6_ADDRSTRLEN + 8];
    const np_cidr *c;
    np_addr_str(a, as, sizeof(as));
    if ((c = np_match(p->deny, p->ndeny, a))) {
        np_cidr_str(c, cs, sizeof(cs));
        snprintf(why, whylen, "%s is in callback.deny %s", as, cs);
        return -1;
    }
    if (p->nallow && !np_match(p->allow, p->nallow, a)) {
        snprintf(why, whylen, "%s is in no range of callback.allow", as);
        return -1;
    }
    if (self_check && p->self_port && a->port == p->self_port &&
        np_match(p->self, p->nself, a)) {
        snprintf(why, whylen, "%s port %d is tickd's own API", as, a->port);
        return -1;
    }
    return 0;
}

int netpolicy_check(const netpolicy *p, const struct sockaddr *sa, char *why, size_t whylen)
{
    np_addr a;
    if (np_addr_of(sa, &a) != 0) {
        snprintf(why, whylen, "not an IP address");
        return -1;
    }
    return np_check(p, &a, 1, why, whylen);
}

/* host as a literal address (brackets and a zone id stripped) into sa. */
static int np_literal(const char *host, struct sockaddr_storage *ss)
{
    char h[INET6_ADDRSTRLEN + 1];
    size_t n = strlen(host);
    memset(ss, 0, sizeof(*ss));
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    n = strcspn(host, "%") < n ? strcspn(host, "%") : n;
    if (n == 0 || n >= sizeof(h)) return -1;
    memcpy(h, host, n);
    h[n] = '\0';
    struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, h, &s4->sin_addr) == 1) {
        s4->sin_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, h, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        return 0;
    }
    return -1;
}

int netpolicy_address_form(const char *host, char *out, size_t outlen)
{
    struct sockaddr_storage ss;
    np_addr a;
    char s[INET6_ADDRSTRLEN];
    if (np_literal(host, &ss) != 0) return -1;
    np_addr_of((struct sockaddr *)&ss, &a);
    np_addr_str(&a, s, sizeof(s));
    int n = snprintf(out, outlen, a.has4 ? "%s" : "[%s]", s);
    return n > 0 && (size_t)n < outlen ? 0 : -1;
}

/* localhost and its subdomains (RFC 6761), with or without the final dot. */
static int np_localhost(const char *host)
{
    size_t n = strlen(host);
    if (n && host[n - 1] == '.') n--;
    return n >= 9 && strncasecmp(host + n - 9, "localhost", 9) == 0 &&
           (n == 9 || host[n - 10] == '.');
}

int netpolicy_check_host(const netpolicy *p, const char *host, int port, char *why, size_t whylen)
{
    struct sockaddr_storage ss;
    np_addr a;
    if (np_localhost(host)) {
        /* a name: the policy's ranges apply when it resolves, but a task
         * pointed at tickd itself is refused at once */
        static const char *lo[] = {"127.0.0.1", "::1"};
        for (int i = 0; i < 2 && p->self_port && port == p->self_port; i++) {
            np_literal(lo[i], &ss);
            np_addr_of((struct sockaddr *)&ss, &a);
            if (np_match(p->self, p->nself, &a)) {
                snprintf(why, whylen, "%s port %d is tickd's own API", host, port);
                return -1;
            }
        }
        return 0;
    }
    if (np_literal(host, &ss) != 0) return 0;
    np_addr_of((struct sockaddr *)&ss, &a);
    a.port = port;
    return np_check(p, &a, 1, why, whylen);
}

/* ---- tickd's own address ------------------------------------------------- */

static void np_self_add(netpolicy *p, const struct sockaddr *sa)
{
    np_addr a;
    if (!sa || np_addr_of(sa, &a) != 0) return;
    p->self = xrealloc(p->self, (size_t)(p->nself + 1) * sizeof(*p->self));
    np_cidr *c = &p->self[p->nself++];
    memset(c, 0, sizeof(*c));
    if (a.has4) {
        memcpy(c->addr, a.a4, 4);
        c->bits = 32;
    } else {
        c->v6 = 1;
        memcpy(c->addr, a.a6, 16);
        c->bits = 128;
    }
}

static void np_self_str(netpolicy *p, const char *s)
{
    struct sockaddr_storage ss;
    if (np_literal(s, &ss) == 0) np_self_add(p, (struct sockaddr *)&ss);
}

/* 0.0.0.0 or ::, however written ("0", "0.0.0.0.", "[::0]"): a wildcard */
static int np_unspecified(const struct sockaddr *sa)
{
    static const uint8_t zero[16];
    np_addr a;
    if (!sa || np_addr_of(sa, &a) != 0) return 0;
    return a.has4 ? memcmp(a.a4, zero, 4) == 0 : memcmp(a.a6, zero, 16) == 0;
}

void netpolicy_set_self(netpolicy *p, const char *host, int port)
{
    p->self_port = port;
    /* connecting to the unspecified address reaches the local host */
    np_self_str(p, "0.0.0.0");
    np_self_str(p, "::");
    struct sockaddr_storage ss;
    int any = !*host || strcmp(host, "*") == 0;
    if (!any && np_literal(host, &ss) == 0) {
        if (!(any = np_unspecified((struct sockaddr *)&ss))) np_self_add(p, (struct sockaddr *)&ss);
    } else if (!any) {
        /* a name (localhost, the host's own, or "0" that the listener
         * reads as 0.0.0.0): what it resolves to now */
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
        if (getaddrinfo(host, NULL, &hints, &res) == 0) {
            for (struct addrinfo *r = res; r; r = r->ai_next) {
                if (np_unspecified(r->ai_addr)) any = 1;
                else np_self_add(p, r->ai_addr);
            }
            freeaddrinfo(res);
        }
    }
    if (any) {
        p->self_any = 1;
        np_self_str(p, "::1");
        /* the whole of 127/8 answers on a wildcard listener */
        p->self = xrealloc(p->self, (size_t)(p->nself + 1) * sizeof(*p->self));
        np_cidr *c = &p->self[p->nself++];
        memset(c, 0, sizeof(*c));
        c->addr[0] = 127;
        c->bits = 8;
        struct ifaddrs *ifa = NULL;
        if (getifaddrs(&ifa) == 0) {
            for (struct ifaddrs *i = ifa; i; i = i->ifa_next) np_self_add(p, i->ifa_addr);
            freeifaddrs(ifa);
        }
    }
}
