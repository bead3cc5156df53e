/* config.h -- tickd's settings: one static table (config.c) gives each key its
 * section, type, default, bounds and doc line. The same table parses the ini
 * file (inih), applies TICKD_<SECTION>_<KEY> environment overrides, and prints
 * the commented default file (conf/tickd.ini is generated from it). */
#ifndef TICKD_CONFIG_H
#define TICKD_CONFIG_H

#include <stdint.h>
#include <stdio.h>

/* [host:NAME]: TLS settings for callbacks to one receiving host, each key
 * overriding its [callback] namesake (set: which ones were given). */
#define CONFIG_HOSTS_MAX 16
typedef struct config_host {
    char name[64];             /* as in the callback URL's host */
    unsigned set;              /* bit i: the i-th host key was given */
    char ca_file[1024];
    char ca_path[1024];
    int64_t ca_system;
    char client_cert[1024];
    char client_key[1024];
    char client_key_password_env[128]; /* the variable holding client_key's passphrase */
    char tls_min_version[8];
    int64_t insecure_skip_verify; /* certificates of this host are not verified */
} config_host;

/* Which field of a host is set (config_host.set), by key name; -1 if none. */
int config_host_key(const char *name);

typedef struct config {
    /* [server] */
    char listen[256];          /* host:port of the HTTP API */
    char api_token[1024];      /* space-separated tokens; "" = the API is open */
    char read_tokens[1024];    /* space-separated tokens that may only read (GET, HEAD) */
    int64_t max_body;          /* bytes */
    int64_t idle_timeout_ms;
    int64_t header_timeout_ms; /* a request head must be read within this */
    int64_t body_timeout_ms;   /* a request body must be read within this */
    int64_t max_connections;   /* API connections open at once */
    int64_t workers;           /* dispatch threads; 0 = CPU count */
    int64_t max_inflight;      /* claimed tasks held at once */
    int64_t host_connections;  /* per worker and receiving host */
    int64_t keepalive_ms;      /* an unused callback connection closes after this */
    int64_t hosts_max;         /* receiving hosts' state a dispatch worker keeps */
    int64_t shutdown_grace_ms;
    char store[16];            /* "redis" or "memory" */
    char log_level[16];
    char log_format[8];        /* "text" or "json" */
    int64_t access_log;        /* a line per API request */
    /* [redis] */
    char nodes[1024];          /* host:port[,host:port...] */
    char username[256];        /* ACL user ("" = default) */
    char password[512];        /* "" = no AUTH */
    char prefix[64];
    int64_t timeout_ms;
    char scripts_dir[1024];    /* "" = next to the binary */
    int64_t wait_replicas;
    int64_t wait_timeout_ms;
    int64_t allow_eviction;    /* accept a maxmemory-policy that may evict keys */
    int64_t watch_ms;          /* how often the store's memory policy and data markers are read */
    /* [scheduler] */
    int64_t tick_ms;
    int64_t lookahead_ms;
    int64_t batch;
    int64_t buckets;
    int64_t lease_margin_ms;
    int64_t retention_ms;
    int64_t failed_retention_ms;
    int64_t slice_grace_ms;
    int64_t flow_holds_max;    /* destinations held back at once (Retry-After) */
    /* [callback] */
    char deny[1024];           /* CIDR list callbacks may not connect to */
    char allow[1024];          /* when set, the only CIDRs callbacks may connect to */
    char signing_secrets[2048]; /* whsec_<base64> ...; "" = callbacks unsigned */
    char ca_file[1024];        /* PEM CA certificates trusted for https:// callbacks */
    char ca_path[1024];        /* a hashed directory of them (openssl rehash) */
    int64_t ca_system;         /* 1: the system's CAs are trusted too */
    char client_cert[1024];    /* PEM client certificate (mTLS), chain after it */
    char client_key[1024];     /* its PEM key ("" = in client_cert's file) */
    char client_key_password[512]; /* decrypts client_key ("" = not encrypted) */
    char tls_min_version[8];   /* "1.2" or "1.3" */
    char proxy[1024];          /* http://, https://, socks5:// or socks5h:// proxy */
    char no_proxy[1024];       /* hosts reached without it (libcurl's no_proxy) */
    char on_failure_url[2048]; /* told of every failed task that names no on_failure */
    /* [host:NAME] sections */
    config_host hosts[CONFIG_HOSTS_MAX];
    int nhosts;
} config;

/* Fill `c` with the defaults. */
void config_defaults(config *c);

/* Load an ini file over `c`. Returns 0, or -1 with "file:line: key: reason" in
 * err. Unknown sections and keys are errors. */
int config_load_file(config *c, const char *path, char *err, size_t errlen);

/* Apply TICKD_<SECTION>_<KEY> environment variables. Returns 0 or -1 + err. */
int config_load_env(config *c, char *err, size_t errlen);

/* Set one key by its section and name, as the file and the flags do.
 * Returns 0 or -1 + "key: reason" in err. */
int config_set(config *c, const char *section, const char *key,
               const char *value, char *err, size_t errlen);

/* Check relations between keys (lookahead vs tick, ...). 0 or -1 + err. */
int config_validate(const config *c, char *err, size_t errlen);

/* The keys whose values differ between a and b, as "section.key, ..." into
 * out (cut at outlen), "[host:NAME] sections" for any change there; returns
 * how many. */
int config_diff(const config *a, const config *b, char *out, size_t outlen);

/* Write the commented default config file. */
void config_print_defaults(FILE *out);

#endif
