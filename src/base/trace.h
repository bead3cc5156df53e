/* trace.h -- W3C Trace Context (https://www.w3.org/TR/trace-context/) across
 * the delay: a task keeps its producer's `traceparent` (and `tracestate`),
 * and each attempt of its callback carries the same trace id with a span id
 * of its own, so a tracing backend sees the producer, the delay and every
 * attempt as one trace.
 *
 * Span ids are derived, not random: the span of attempt n of a task is the
 * same whichever replica makes it and however often it is made (a claim
 * made again after a crash), and differs for every other attempt or task. A
 * schedule's run that gives no trace context starts a trace of its own, its
 * ids derived from the run's task id (the same run made twice is one trace). */
#ifndef TICKD_TRACE_H
#define TICKD_TRACE_H

#include <stddef.h>
#include <stdint.h>

/* "00-" 32 hex "-" 16 hex "-" 2 hex */
#define TRACE_PARENT_LEN 55
#define TRACE_STATE_MAX 512

/* Parse a traceparent as the W3C rules read it (version 2 lowercase hex,
 * not ff; trace id 32 and parent id 16 lowercase hex, not all zero; flags 2
 * lowercase hex; version 00 exactly 55 characters, a later version at least
 * 55 with '-' after them). Writes the version-00 form into out (the form
 * tickd sends on) and returns 0; or -1 with the reason in why. */
int trace_parent_parse(const char *s, char out[TRACE_PARENT_LEN + 1], char *why, size_t whylen);

/* A tracestate: at most 512 characters of printable ASCII, list members
 * "key=value" separated by commas (at most 32). 0, or -1 with why. */
int trace_state_check(const char *s, char *why, size_t whylen);

/* The key span ids are hashed under: 16 bytes, fixed, so that every
 * replica and every release derives the same span for an attempt. */
#define TRACE_SPAN_KEY "tickd trace span"

/* The traceparent attempt `attempt` of task `id`, due at due_ms, sends
 * under the stored parent (a parsed one): the same version, trace id and
 * flags, its own span id (the due time tells a retry of the task, whose
 * attempts count from 1 again, from the attempts before it): SipHash-2-4
 * under TRACE_SPAN_KEY of "<parent>\n<due_ms>", NUL, id, NUL and the
 * attempt in decimal, its 8 bytes little-endian as hex (1 in the last byte
 * if all 8 are zero). SipHash, not a cryptographic digest: a span id needs
 * to differ from every other, which 64 bits of either give alike, and this
 * is made for every callback (SHA-256 over the same bytes cost a twentieth
 * of tickd's CPU a callback on a processor without SHA instructions). */
void trace_for_attempt(const char *parent, const char *id, int attempt, int64_t due_ms,
                       char out[TRACE_PARENT_LEN + 1]);

/* A new trace for the task `id` (a schedule's run with no trace context):
 * trace and parent ids derived from id, sampled: the first 16 and 8 bytes
 * of SHA-256 over "trace" and "root", NUL, id, NUL, "0". */
void trace_new(const char *id, char out[TRACE_PARENT_LEN + 1]);

/* The 32 hex digits of a traceparent's trace id, as they appear in it. */
#define trace_id_of(tp) ((tp) + 3)

#endif
