/* wheel.c -- hierarchical timing wheel (see wheel.h for the contract).
 *
 * Time is counted in ticks of `res` ms on an absolute grid: tick k covers the
 * instant k * res. A timer due at due_ms belongs to tick ceil(due_ms / res),
 * and wheel_advance(now) handles every tick up to floor(now / res); that is
 * exactly "fires at the first now >= due rounded up to the resolution".
 *
 * `cur` is the last tick already handled. A pending timer with tick > cur is
 * filed by the highest base-64 digit in which its tick differs from cur:
 * that digit's position is its level, the digit's value its slot. So within
 * level L every occupied slot is greater than cur's digit L, and the next
 * thing that can happen is the lowest set bit of the lowest non-empty level:
 * the start of that slot. Advancing jumps the cursor straight there (no walk
 * over empty slots), re-files that slot's timers against the new cursor (they
 * land in lower levels, or are due), and repeats until the next slot starts
 * after `now`. Ticks differing from cur above the top level (beyond the
 * wheel's 64^8-tick span) wait in an overflow list that is re-filed each time
 * the cursor enters a new 64^8 epoch.
 *
 * Other homes of a pending timer, told apart by `level`:
 *   LV_READY   due at or before cur when armed (a past due, or a repeat or a
 *              callback's add that fell due during an advance); it fires on
 *              the next advance. Timers armed inside an advance never fire
 *              in that same advance: that bounds an advance even for a
 *              forever-repeat whose interval is shorter than the jump.
 *   LV_FIRING  collected by the running advance, sorted by (due, seq), not
 *              yet called back. Kept in the wheel, not on the stack, so a
 *              callback can cancel them in O(1) and they then do not fire.
 */
#include "base/wheel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LV_OVERFLOW WHEEL_LEVELS
#define LV_READY (WHEEL_LEVELS + 1)
#define LV_FIRING (WHEEL_LEVELS + 2)
#define LV_COUNT (WHEEL_LEVELS + 3)
#define OVERFLOW(w) ((w)->lists[LV_OVERFLOW][0])
#define READY(w) ((w)->lists[LV_READY][0])
#define FIRING(w) ((w)->lists[LV_FIRING][0])
#define SPAN_BITS (WHEEL_BITS * WHEEL_LEVELS) /* 48 */
#define KTAB_MIN 16

struct wlist {
    wheel_timer *head, *tail;
};

struct wheel {
    uint64_t res;       /* ms per tick */
    uint64_t cur;       /* last tick handled */
    uint64_t seq;       /* next add order */
    uint64_t ready_min; /* <= every ready timer's rounded due, in ms */
    size_t count;       /* pending timers, all homes */
    size_t nkeys;       /* pending keyed timers */
    int advancing;
    /* lists[level][slot]: the wheel proper, then one list (slot 0) for each
     * special home, so every pending timer's list is found the same way */
    uint64_t occ[LV_COUNT];
    struct wlist lists[LV_COUNT][WHEEL_SLOTS];
    wheel_timer **ktab;
    size_t kmask; /* buckets - 1, a power of two minus one */
};

/* ---- ticks ------------------------------------------------------------ */

static uint64_t wheel_tick_of(const wheel *w, uint64_t ms)
{
    /* res 1 is the common case; skip the division */
    if (w->res == 1)
        return ms;
    return ms / w->res + (ms % w->res != 0);
}

static uint64_t wheel_ms_of(const wheel *w, uint64_t tick)
{
    if (tick > UINT64_MAX / w->res)
        return WHEEL_NEVER; /* past the end of time; saturate */
    return tick * w->res;
}

/* ---- lists ------------------------------------------------------------ */

static void wlist_append(struct wlist *l, wheel_timer *t)
{
    t->next = NULL;
    t->prev = l->tail;
    if (l->tail)
        l->tail->next = t;
    else
        l->head = t;
    l->tail = t;
}

static void wlist_remove(struct wlist *l, wheel_timer *t)
{
    if (t->prev)
        t->prev->next = t->next;
    else
        l->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    else
        l->tail = t->prev;
    t->next = t->prev = NULL;
}

/* File a pending timer (already counted and keyed) against the cursor. */
static void wheel_place(wheel *w, wheel_timer *t)
{
    uint64_t tick = wheel_tick_of(w, t->due_ms);
    if (tick <= w->cur) {
        uint64_t ms = wheel_ms_of(w, tick);
        if (ms < w->ready_min)
            w->ready_min = ms;
        t->level = LV_READY;
        t->slot = 0;
        wlist_append(&READY(w), t);
        return;
    }
    uint64_t diff = tick ^ w->cur;
    if (diff >> SPAN_BITS) {
        t->level = LV_OVERFLOW;
        t->slot = 0;
        wlist_append(&OVERFLOW(w), t);
        return;
    }
    int level = (63 - __builtin_clzll(diff)) / WHEEL_BITS;
    int slot = (int)((tick >> (level * WHEEL_BITS)) & (WHEEL_SLOTS - 1));
    t->level = level;
    t->slot = slot;
    wlist_append(&w->lists[level][slot], t);
    w->occ[level] |= UINT64_C(1) << slot;
}

/* Take a pending timer out of whatever list holds it (count and key index
 * untouched). Kept branch-light: cancel is bound by cache misses on t and
 * its neighbours, and the fewer instructions each cancel takes, the more of
 * those misses the CPU overlaps. The occupancy words of the special homes
 * are cleared too, harmlessly, rather than tested for. */
static inline void wheel_unlink(wheel *w, wheel_timer *t)
{
    struct wlist *l = &w->lists[t->level][t->slot];
    wlist_remove(l, t);
    if (!l->head)
        w->occ[t->level] &= ~(UINT64_C(1) << t->slot);
    t->level = t->slot = -1;
}

/* ---- key index -------------------------------------------------------- */

static uint64_t wheel_hash(const char *key)
{
    /* FNV-1a, then a final mix so the low bits (the bucket) depend on all
     * of the key */
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= UINT64_C(0x100000001b3);
    }
    h ^= h >> 33;
    h *= UINT64_C(0xff51afd7ed558ccd);
    h ^= h >> 33;
    return h;
}

static void wheel_key_grow(wheel *w)
{
    size_t n = (w->kmask + 1) * 2;
    wheel_timer **tab = calloc(n, sizeof *tab);
    if (!tab)
        return; /* keep the old table: longer chains, but add never fails */
    for (size_t i = 0; i <= w->kmask; i++) {
        wheel_timer *t = w->ktab[i];
        while (t) {
            wheel_timer *nx = t->knext;
            size_t b = (size_t)t->khash & (n - 1);
            t->knext = tab[b];
            tab[b] = t;
            t = nx;
        }
    }
    free(w->ktab);
    w->ktab = tab;
    w->kmask = n - 1;
}

static void wheel_key_insert(wheel *w, wheel_timer *t)
{
    if (w->nkeys + 1 > w->kmask + 1 && w->kmask < SIZE_MAX / 4)
        wheel_key_grow(w);
    size_t b = (size_t)t->khash & w->kmask;
    t->knext = w->ktab[b];
    w->ktab[b] = t;
    w->nkeys++;
}

static void wheel_key_remove(wheel *w, wheel_timer *t)
{
    wheel_timer **pp = &w->ktab[(size_t)t->khash & w->kmask];
    while (*pp && *pp != t)
        pp = &(*pp)->knext;
    if (*pp) {
        *pp = t->knext;
        w->nkeys--;
    }
    t->knext = NULL;
}

static wheel_timer *wheel_key_lookup(const wheel *w, const char *key,
                                     uint64_t h)
{
    for (wheel_timer *t = w->ktab[(size_t)h & w->kmask]; t; t = t->knext)
        if (t->khash == h && strcmp(t->key, key) == 0)
            return t;
    return NULL;
}

/* ---- public API ------------------------------------------------------- */

wheel *wheel_create(uint64_t resolution_ms, uint64_t now_ms)
{
    if (resolution_ms < 1 || resolution_ms > 1000)
        return NULL;
    wheel *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->ktab = calloc(KTAB_MIN, sizeof *w->ktab);
    if (!w->ktab) {
        free(w);
        return NULL;
    }
    w->kmask = KTAB_MIN - 1;
    w->res = resolution_ms;
    w->cur = now_ms / resolution_ms;
    w->ready_min = WHEEL_NEVER;
    return w;
}

void wheel_free(wheel *w)
{
    if (!w)
        return;
    free(w->ktab);
    free(w);
}

void wheel_timer_init(wheel_timer *t, wheel_cb *cb, void *arg)
{
    memset(t, 0, sizeof *t);
    t->cb = cb;
    t->arg = arg;
    t->times = 1;
    t->level = t->slot = -1;
}

int wheel_pending(const wheel_timer *t)
{
    return t->level >= 0;
}

size_t wheel_count(const wheel *w)
{
    return w->count;
}

int wheel_cancel(wheel *w, wheel_timer *t)
{
    if (t->level < 0)
        return 0;
    wheel_unlink(w, t);
    if (t->key)
        wheel_key_remove(w, t);
    w->count--;
    return 1;
}

wheel_timer *wheel_find(wheel *w, const char *key)
{
    return wheel_key_lookup(w, key, wheel_hash(key));
}

int wheel_cancel_key(wheel *w, const char *key)
{
    wheel_timer *t = wheel_find(w, key);
    return t ? wheel_cancel(w, t) : 0;
}

void wheel_add(wheel *w, wheel_timer *t, const char *key, uint64_t due_ms,
               uint64_t interval_ms, int64_t times)
{
    wheel_cancel(w, t);
    uint64_t h = 0;
    if (key) {
        h = wheel_hash(key);
        wheel_timer *old = wheel_key_lookup(w, key, h);
        if (old)
            wheel_cancel(w, old);
    }
    /* be lenient with nonsense rather than fail: 0 runs means one, any
     * negative count means forever, a zero period means the smallest */
    if (times == 0)
        times = 1;
    else if (times < 0)
        times = -1;
    if (times != 1 && interval_ms == 0)
        interval_ms = 1;
    t->key = key;
    t->khash = h;
    t->knext = NULL;
    t->due_ms = due_ms;
    t->interval_ms = interval_ms;
    t->times = times;
    t->seq = w->seq++;
    if (key)
        wheel_key_insert(w, t);
    w->count++;
    wheel_place(w, t);
}

/* Firing order: due time, then add order. seq is unique per pending timer,
 * so this is a strict total order. */
static int wheel_before(const wheel_timer *a, const wheel_timer *b)
{
    return a->due_ms < b->due_ms || (a->due_ms == b->due_ms && a->seq < b->seq);
}

static wheel_timer *wheel_merge(wheel_timer *a, wheel_timer *b)
{
    wheel_timer head, *tail = &head;
    while (a && b) {
        if (wheel_before(b, a)) {
            tail->next = b;
            b = b->next;
        } else {
            tail->next = a;
            a = a->next;
        }
        tail = tail->next;
    }
    tail->next = a ? a : b;
    return head.next;
}

/* Sort the firing list. Natural merge sort: collected timers come mostly in
 * order already (tick by tick), so the ascending runs are long and the sort
 * is close to linear. */
static void wheel_sort_firing(wheel *w)
{
    wheel_timer *bins[64] = { NULL };
    wheel_timer *in = FIRING(w).head;
    if (!in || !in->next)
        return;
    while (in) {
        wheel_timer *run = in, *end = in;
        while (end->next && !wheel_before(end->next, end))
            end = end->next;
        in = end->next;
        end->next = NULL;
        int i = 0;
        /* binary-counter merging keeps merged lengths balanced */
        for (; i < 63 && bins[i]; i++) {
            run = wheel_merge(bins[i], run);
            bins[i] = NULL;
        }
        bins[i] = bins[i] ? wheel_merge(bins[i], run) : run;
    }
    wheel_timer *all = NULL;
    for (int i = 0; i < 64; i++)
        if (bins[i])
            all = all ? wheel_merge(bins[i], all) : bins[i];
    wheel_timer *prev = NULL;
    FIRING(w).head = all;
    for (wheel_timer *t = all; t; t = t->next) {
        t->prev = prev;
        prev = t;
    }
    FIRING(w).tail = prev;
}

/* Move the cursor to `nt`, collecting every timer with tick <= nt on the
 * firing list and re-filing what cascades. */
static void wheel_collect(wheel *w, uint64_t nt)
{
    for (;;) {
        int level = 0;
        while (level < WHEEL_LEVELS && !w->occ[level])
            level++;
        uint64_t start;
        struct wlist l;
        if (level < WHEEL_LEVELS) {
            int slot = __builtin_ctzll(w->occ[level]);
            int shift = (level + 1) * WHEEL_BITS;
            start = ((w->cur >> shift) << shift) |
                    ((uint64_t)slot << (level * WHEEL_BITS));
            if (start > nt)
                break;
            l = w->lists[level][slot];
            w->lists[level][slot].head = w->lists[level][slot].tail = NULL;
            w->occ[level] &= ~(UINT64_C(1) << slot);
        } else {
            uint64_t epoch = w->cur >> SPAN_BITS;
            /* overflow is only ever non-empty below the last epoch */
            if (!OVERFLOW(w).head || epoch + 1 > UINT64_MAX >> SPAN_BITS)
                break;
            start = (epoch + 1) << SPAN_BITS;
            if (start > nt)
                break;
            l = OVERFLOW(w);
            OVERFLOW(w).head = OVERFLOW(w).tail = NULL;
        }
        /* every level below is empty, so jumping straight to the start of
         * this slot skips nothing */
        w->cur = start;
        wheel_timer *t = l.head;
        while (t) {
            wheel_timer *nx = t->next;
            if (wheel_tick_of(w, t->due_ms) == start) {
                t->level = LV_FIRING;
                t->slot = 0;
                wlist_append(&FIRING(w), t);
            } else {
                wheel_place(w, t);
            }
            t = nx;
        }
    }
    /* the next slot starts after nt, so nothing filed changes level */
    w->cur = nt;
}

size_t wheel_advance(wheel *w, uint64_t now_ms)
{
    uint64_t nt = now_ms / w->res;
    /* a callback calling advance would interleave two firing passes; the
     * outer pass already handles everything due */
    if (w->advancing || nt < w->cur)
        return 0;
    w->advancing = 1;
    /* ready timers are all due before anything still in the wheel */
    for (wheel_timer *t = READY(w).head; t; t = t->next)
        t->level = LV_FIRING;
    FIRING(w) = READY(w);
    READY(w).head = READY(w).tail = NULL;
    w->ready_min = WHEEL_NEVER;
    wheel_collect(w, nt);
    wheel_sort_firing(w);
    size_t fired = 0;
    wheel_timer *t;
    /* re-read the head each time: a callback may have cancelled, re-added
     * or freed any timer, including the next one */
    while ((t = FIRING(w).head) != NULL) {
        wlist_remove(&FIRING(w), t);
        t->level = t->slot = -1;
        if (t->times == 1) {
            t->times = 0;
            if (t->key)
                wheel_key_remove(w, t);
            w->count--;
        } else {
            if (t->times > 0)
                t->times--;
            t->due_ms = t->due_ms > UINT64_MAX - t->interval_ms
                            ? UINT64_MAX
                            : t->due_ms + t->interval_ms;
            wheel_place(w, t);
        }
        fired++;
        /* nothing of t is used after the call: the callback may free it */
        if (t->cb)
            t->cb(w, t, t->arg);
    }
    w->advancing = 0;
    return fired;
}

uint64_t wheel_next_due(wheel *w)
{
    uint64_t best = WHEEL_NEVER;
    if (FIRING(w).head) /* only seen from a callback; the list is sorted */
        best = wheel_ms_of(w, wheel_tick_of(w, FIRING(w).head->due_ms));
    if (READY(w).head && w->ready_min < best)
        best = w->ready_min;
    for (int level = 0; level < WHEEL_LEVELS; level++) {
        if (!w->occ[level])
            continue;
        /* the lowest non-empty level holds the earliest slot start */
        int slot = __builtin_ctzll(w->occ[level]);
        int shift = (level + 1) * WHEEL_BITS;
        uint64_t start = ((w->cur >> shift) << shift) |
                         ((uint64_t)slot << (level * WHEEL_BITS));
        uint64_t ms = wheel_ms_of(w, start);
        return ms < best ? ms : best;
    }
    if (OVERFLOW(w).head) {
        uint64_t ms = wheel_ms_of(w, ((w->cur >> SPAN_BITS) + 1) << SPAN_BITS);
        if (ms < best)
            best = ms;
    }
    return best;
}

/* ---- self-check ------------------------------------------------------- */

static int wheel_fail(const char *what, const wheel_timer *t)
{
    fprintf(stderr, "wheel_check: %s (timer %p)\n", what, (const void *)t);
    return -1;
}

/* Check one list: links, home fields, and per-timer rules. Adds its length
 * to *n. */
static int wheel_check_list(const wheel *w, const struct wlist *l, int level,
                            int slot, size_t *n)
{
    const wheel_timer *prev = NULL;
    size_t len = 0;
    for (const wheel_timer *t = l->head; t; prev = t, t = t->next) {
        if (++len > w->count)
            return wheel_fail("list longer than count (cycle?)", t);
        if (t->prev != prev)
            return wheel_fail("bad prev link", t);
        if (t->level != level || t->slot != slot)
            return wheel_fail("level/slot fields do not match list", t);
        if (t->times == 0 || t->times < -1)
            return wheel_fail("pending timer with no runs left", t);
        if (t->times != 1 && t->interval_ms == 0)
            return wheel_fail("repeating timer with zero interval", t);
        if (t->seq >= w->seq)
            return wheel_fail("seq from the future", t);
        uint64_t tick = wheel_tick_of(w, t->due_ms);
        if (level < WHEEL_LEVELS) {
            uint64_t diff = tick ^ w->cur;
            if (tick <= w->cur)
                return wheel_fail("filed timer already due", t);
            if (diff >> SPAN_BITS ||
                (63 - __builtin_clzll(diff)) / WHEEL_BITS != level)
                return wheel_fail("timer on the wrong level", t);
            if ((int)((tick >> (level * WHEEL_BITS)) & (WHEEL_SLOTS - 1)) != slot)
                return wheel_fail("timer in the wrong slot", t);
        } else if (level == LV_OVERFLOW) {
            if (tick <= w->cur || !((tick ^ w->cur) >> SPAN_BITS))
                return wheel_fail("overflow timer within the span", t);
        } else if (level == LV_READY) {
            if (tick > w->cur)
                return wheel_fail("ready timer not yet due", t);
            if (w->ready_min > wheel_ms_of(w, tick))
                return wheel_fail("ready_min above a ready timer", t);
        } else if (level == LV_FIRING) {
            if (!w->advancing)
                return wheel_fail("firing timer outside advance", t);
            if (prev && wheel_before(t, prev))
                return wheel_fail("firing list out of order", t);
        }
        if (t->key) {
            if (t->khash != wheel_hash(t->key))
                return wheel_fail("stale key hash", t);
            if (wheel_key_lookup(w, t->key, t->khash) != t)
                return wheel_fail("keyed timer not found by its key", t);
        }
    }
    if (l->tail != prev)
        return wheel_fail("bad tail", l->tail);
    *n += len;
    return 0;
}

int wheel_check(const wheel *w)
{
    size_t n = 0;
    for (int level = 0; level < WHEEL_LEVELS; level++) {
        uint64_t digit = (w->cur >> (level * WHEEL_BITS)) & (WHEEL_SLOTS - 1);
        for (int slot = 0; slot < (int)WHEEL_SLOTS; slot++) {
            const struct wlist *l = &w->lists[level][slot];
            int bit = (int)((w->occ[level] >> slot) & 1);
            if (bit != (l->head != NULL))
                return wheel_fail("occupancy bit disagrees with slot", l->head);
            if (l->head && (uint64_t)slot <= digit)
                return wheel_fail("occupied slot at or behind the cursor",
                                  l->head);
            if (wheel_check_list(w, l, level, slot, &n))
                return -1;
        }
    }
    if (wheel_check_list(w, &OVERFLOW(w), LV_OVERFLOW, 0, &n) ||
        wheel_check_list(w, &READY(w), LV_READY, 0, &n) ||
        wheel_check_list(w, &FIRING(w), LV_FIRING, 0, &n))
        return -1;
    if (n != w->count)
        return wheel_fail("count disagrees with the lists", NULL);
    for (int level = WHEEL_LEVELS; level < LV_COUNT; level++)
        if (w->occ[level])
            return wheel_fail("occupancy bits on a special list", NULL);
    /* key index: every entry pending, keyed, in its bucket, unique */
    size_t keyed = 0;
    for (size_t b = 0; b <= w->kmask; b++) {
        for (const wheel_timer *t = w->ktab[b]; t; t = t->knext) {
            if (++keyed > w->nkeys)
                return wheel_fail("key index longer than nkeys", t);
            if (t->level < 0 || !t->key)
                return wheel_fail("key index holds an idle or keyless timer",
                                  t);
            if (((size_t)t->khash & w->kmask) != b)
                return wheel_fail("key in the wrong bucket", t);
            if (wheel_key_lookup(w, t->key, t->khash) != t)
                return wheel_fail("duplicate key", t);
        }
    }
    if (keyed != w->nkeys)
        return wheel_fail("nkeys disagrees with the key index", NULL);
    if (w->nkeys > w->count)
        return wheel_fail("more keys than timers", NULL);
    return 0;
}
