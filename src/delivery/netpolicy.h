/* netpolicy.h -- where callbacks may connect: the SSRF guard.
 *
 * callback.deny and callback.allow are lists of CIDRs, parsed once at start.
 * An address is refused when it is in a deny range, when an allow list is set
 * and it is in none of its ranges, or when it is tickd's own API (address and
 * port), so a task cannot call tickd back in a loop. The check runs on the
 * address actually connected to (after DNS, by both client paths), so a name
 * that resolves somewhere else than it did at POST cannot pass; a literal
 * address is checked at POST too.
 *
 * An IPv4 address and its IPv4-mapped IPv6 form (::ffff:a.b.c.d) are one
 * address here: each is matched against the IPv4 ranges and the IPv6 ones.
 *
 * After netpolicy_init and netpolicy_set_self the policy is read-only and
 * may be read from any thread. */
#ifndef TICKD_NETPOLICY_H
#define TICKD_NETPOLICY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* The error of an attempt refused by the policy (never retried). */
#define NETPOLICY_DENIED "destination denied by policy"

typedef struct np_cidr {
    int v6;                     /* 0: addr[0..4) is IPv4 */
    uint8_t addr[16];
    int bits;
} np_cidr;

typedef struct netpolicy {
    np_cidr *deny, *allow;
    int ndeny, nallow;
    /* tickd's own API: connections to these addresses on self_port are
     * refused (self_any: any local address, the API listens on a wildcard) */
    int self_port;              /* 0: not known yet */
    int self_any;
    np_cidr *self;
    int nself;
} netpolicy;

/* Parse one space-separated CIDR list ("10.0.0.0/8 ::1/128 192.0.2.1"; no
 * prefix length: a single address). Returns 0, or -1 with "key: reason
 * naming the entry" in err and nothing allocated. */
int netpolicy_parse(const char *key, const char *list, np_cidr **out, int *n,
                    char *err, size_t errlen);

/* Parse deny and allow into p. 0, or -1 + err naming callback.deny or
 * callback.allow and the bad entry. */
int netpolicy_init(netpolicy *p, const char *deny, const char *allow, char *err, size_t errlen);

/* Record tickd's own API address: the listen host (a literal address, "",
 * "0.0.0.0", "::" or "*" for all, or a name resolved once here) and the
 * port actually bound. On a wildcard the loopback and every address of the
 * local interfaces count as tickd's own. */
void netpolicy_set_self(netpolicy *p, const char *host, int port);

/* 0 when a connection to sa is allowed; else -1 with the reason in why. */
int netpolicy_check(const netpolicy *p, const struct sockaddr *sa, char *why, size_t whylen);

/* A URL's host as written (IPv6 in [], IPv4 as libcurl normalised it) and
 * its port: -1 + why when it is a literal address (or localhost pointing at
 * tickd's own port) the policy refuses, else 0 (names are checked later, on
 * each connect). */
int netpolicy_check_host(const netpolicy *p, const char *host, int port, char *why, size_t whylen);

/* A literal address host (bracketed or not, a zone id dropped) in the one
 * form the checks above name it: dotted IPv4 for IPv4 and IPv4-mapped IPv6,
 * else "[v6]" in RFC 5952 text (inet_ntop). 0, or -1 when host is not a
 * literal address (a name) or out is too small. */
int netpolicy_address_form(const char *host, char *out, size_t outlen);

void netpolicy_free(netpolicy *p);

#endif
