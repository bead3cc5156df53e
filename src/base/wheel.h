/* wheel.h -- hierarchical timing wheel.
 *
 * A timer is intrusive: the caller embeds a wheel_timer in its own struct and
 * owns that memory. wheel_add(), wheel_cancel() and the expiry done by
 * wheel_advance() never allocate, so they never fail. The wheel never reads a
 * clock: every time is passed in, in milliseconds on the caller's time line.
 *
 * Levels: level 0 has WHEEL_SLOTS slots of `resolution_ms` each; level n has
 * WHEEL_SLOTS slots each as wide as all of level n-1. Timers far ahead sit in a
 * coarse level and cascade down as the cursor reaches them, so a timer is
 * touched O(levels) times in its life whatever its delay, and advancing over
 * empty time costs nothing per empty slot (occupancy bitmaps are scanned).
 *
 * Firing rule: a timer due at `due_ms` fires during the first wheel_advance(now)
 * with now >= due_ms rounded up to the resolution. It never fires early, never
 * twice for one arming, and timers firing in one advance fire in due order
 * (ties in the order they were added).
 *
 * Keys: a timer may carry a key (a NUL-terminated string owned by the caller,
 * which must stay valid while the timer is pending). Adding a timer whose key
 * is already pending cancels the older timer first (it does not fire). Lookup
 * and cancel by key are O(1) on average. The key index is a hash table grown on
 * add; if growing fails for lack of memory the wheel keeps the smaller table,
 * so add still succeeds. */
#ifndef TICKD_WHEEL_H
#define TICKD_WHEEL_H

#include <stddef.h>
#include <stdint.h>

#define WHEEL_BITS 6
#define WHEEL_SLOTS (1u << WHEEL_BITS)
#define WHEEL_LEVELS 8 /* 64^8 ticks: years even at 1 ms resolution */
#define WHEEL_NEVER UINT64_MAX

typedef struct wheel wheel;
typedef struct wheel_timer wheel_timer;

/* Called when a timer fires. The timer is no longer pending when a one-shot
 * fires; a repeating timer with runs left is already re-armed. The callback may
 * add, cancel or re-add any timer, this one included, and may free the memory
 * holding `t` unless it is still pending. */
typedef void wheel_cb(wheel *w, wheel_timer *t, void *arg);

/* Fields are private to wheel.c; they are here so the caller can embed it. */
struct wheel_timer {
    /* what cancel touches comes first, so it shares one cache line */
    wheel_timer *next, *prev;   /* slot list */
    const char *key;            /* NULL: unkeyed */
    int level, slot;            /* -1 when not pending */
    wheel_timer *knext;         /* key-index chain */
    uint64_t khash;
    uint64_t due_ms;
    uint64_t interval_ms;       /* repeat period */
    int64_t times;              /* runs left: N >= 1, or -1 forever */
    uint64_t seq;               /* add order, for stable ties */
    wheel_cb *cb;
    void *arg;
};

/* Create a wheel with the given resolution (1..1000 ms) whose cursor starts at
 * now_ms. Returns NULL on a bad resolution or out of memory. */
wheel *wheel_create(uint64_t resolution_ms, uint64_t now_ms);

/* Free the wheel. Pending timers are forgotten, not fired; their memory is the
 * caller's. */
void wheel_free(wheel *w);

/* Prepare a timer before first use: not pending, with this callback. */
void wheel_timer_init(wheel_timer *t, wheel_cb *cb, void *arg);

/* Arm `t` to fire at due_ms, then every interval_ms for `times` runs in all
 * (times = 1: once; N > 1: N times; -1: forever; interval_ms must be >= 1 when
 * times != 1). A due time in the past fires on the next advance. If `t` is
 * pending it is first cancelled; if `key` is not NULL and another timer with
 * that key is pending, that one is cancelled. */
void wheel_add(wheel *w, wheel_timer *t, const char *key, uint64_t due_ms,
               uint64_t interval_ms, int64_t times);

/* Disarm `t`. Returns 1 if it was pending, 0 if not. O(1). */
int wheel_cancel(wheel *w, wheel_timer *t);

/* The pending timer with this key, or NULL. */
wheel_timer *wheel_find(wheel *w, const char *key);

/* Cancel the pending timer with this key. Returns 1 if there was one. */
int wheel_cancel_key(wheel *w, const char *key);

/* 1 if the timer is pending. */
int wheel_pending(const wheel_timer *t);

/* Fire every timer due at or before now_ms, in due order. Returns the number
 * of callbacks run. now_ms earlier than the cursor does nothing. */
size_t wheel_advance(wheel *w, uint64_t now_ms);

/* The earliest time at which wheel_advance() may have something to fire:
 * never later than the earliest pending due time (rounded up to the
 * resolution), WHEEL_NEVER when no timer is pending. An event loop sleeps
 * until then. */
uint64_t wheel_next_due(wheel *w);

/* Number of pending timers. */
size_t wheel_count(const wheel *w);

/* Verify every internal invariant (lists, levels, bitmaps, counts, key index).
 * Returns 0 when sound, -1 after printing the first violation to stderr. For
 * tests. */
int wheel_check(const wheel *w);

#endif
