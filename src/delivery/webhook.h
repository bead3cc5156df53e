/* webhook.h -- Standard Webhooks signatures (standardwebhooks.com) for the
 * callbacks, so receivers verify them with the libraries that exist for it.
 *
 * Each callback carries webhook-id (the task id, the same on every attempt),
 * webhook-timestamp (Unix seconds of the attempt) and webhook-signature:
 * "v1,<base64 HMAC-SHA256 of id.timestamp.body>" for each configured secret,
 * space separated, so that during a rotation both the old and the new secret
 * verify.
 *
 * The secrets are decoded once at start and their HMAC pads hashed then, so
 * signing a callback costs two SHA-256 passes over its bytes per secret. The
 * keys are read-only after webhook_keys_parse and shared by the threads; each
 * thread signs with its own webhook_ctx. No function here ever prints a
 * secret. */
#ifndef TICKD_WEBHOOK_H
#define TICKD_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>

#define WEBHOOK_KEYS_MAX 8
#define WEBHOOK_KEY_MIN 24      /* bytes, as the specification asks */
#define WEBHOOK_KEY_MAX 64
/* "v1," + 44 base64 characters + a space, per key */
#define WEBHOOK_SIG_MAX (WEBHOOK_KEYS_MAX * 48 + 1)

typedef struct webhook_keys webhook_keys;
typedef struct webhook_ctx webhook_ctx;

/* Parse a space-separated list of "whsec_<base64>" secrets. "" (or blanks)
 * gives *out = NULL: callbacks unsigned. Returns 0, or -1 with a reason in
 * err that names the key and the secret's position, never its text. */
int webhook_keys_parse(const char *list, webhook_keys **out, char *err, size_t errlen);
/* The same, the reason naming `name` (a flag, a variable) for the key. */
int webhook_keys_parse_as(const char *name, const char *list, webhook_keys **out, char *err,
                          size_t errlen);
void webhook_keys_free(webhook_keys *k);
int webhook_keys_count(const webhook_keys *k);

webhook_ctx *webhook_ctx_new(void);
void webhook_ctx_free(webhook_ctx *c);

/* The webhook-signature value for id, ts_s and body[0..len) into out
 * (WEBHOOK_SIG_MAX bytes), NUL terminated; returns its length. */
size_t webhook_sign(const webhook_keys *k, webhook_ctx *c, const char *id, int64_t ts_s,
                    const char *body, size_t len, char *out);

/* The receiver's side, for tickctl listen. id, ts and sig are the values of
 * the webhook-id, webhook-timestamp and webhook-signature headers as received
 * (NULL when absent), body[0..len) the body. Valid when ts is Unix seconds
 * within WEBHOOK_TOLERANCE_S of now_s and one of the space-separated
 * "v1,<base64>" signatures in sig is the HMAC-SHA256 of "id.ts.body" under
 * one of the keys (compared in constant time; other versions are passed
 * over), as the Standard Webhooks libraries check. Returns 0, or -1 with the
 * reason in why ("no signature matches the secret", "timestamp 420 s old
 * ..."). Safe on any bytes. */
#define WEBHOOK_TOLERANCE_S 300
int webhook_verify(const webhook_keys *k, webhook_ctx *c, const char *id, const char *ts,
                   const char *sig, const char *body, size_t len, int64_t now_s,
                   char *why, size_t whylen);

/* A fresh secret, "whsec_" + base64 of 32 random bytes, into out (>= 64
 * bytes). 0, or -1 when the system has no randomness to give. */
int webhook_gen_secret(char *out, size_t outlen);

#endif
