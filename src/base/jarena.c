/* jarena.c -- cJSON's values of a request body from a block of the thread's
 * (jarena.h). */
#include "base/jarena.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* A task's body is a few hundred bytes of values; a bigger one (a batch)
 * fills the block and goes on with malloc. */
#define JARENA_BYTES (32 * 1024)
#define JARENA_ALIGN 16

typedef struct jarena {
    char *block;                /* malloc'd on this thread's first parse */
    size_t used;                /* bytes handed out since the block was whole */
    size_t live;                /* values handed out and not yet freed */
    int parsing;                /* inside jarena_parse: allocate from the block */
} jarena;

static _Thread_local jarena ja;
static pthread_once_t ja_once = PTHREAD_ONCE_INIT;

static int ja_owns(const void *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)ja.block;
    return ja.block && a >= b && a < b + JARENA_BYTES;
}

static void *ja_malloc(size_t n)
{
    if (ja.parsing && n > 0 && n <= JARENA_BYTES - ja.used) {
        void *p = ja.block + ja.used;
        size_t step = (n + JARENA_ALIGN - 1) & ~(size_t)(JARENA_ALIGN - 1);
        ja.used = step <= JARENA_BYTES - ja.used ? ja.used + step : JARENA_BYTES;
        ja.live++;
        return p;
    }
    return malloc(n);
}

static void ja_free(void *p)
{
    if (!ja_owns(p)) {
        free(p);
        return;
    }
    if (--ja.live == 0) ja.used = 0;
}

static void ja_install(void)
{
    cJSON_Hooks h = {ja_malloc, ja_free};
    cJSON_InitHooks(&h);
}

void jarena_init(void)
{
    pthread_once(&ja_once, ja_install);
}

cJSON *jarena_parse(const char *data, size_t len, const char **end)
{
    jarena_init();
    if (!ja.block) ja.block = malloc(JARENA_BYTES);
    /* the block holds another tree still: this one is malloc'd */
    ja.parsing = ja.block && ja.live == 0;
    cJSON *j = cJSON_ParseWithLengthOpts(data, len, end, 0);
    ja.parsing = 0;
    return j;
}

size_t jarena_used(void)
{
    return ja.used;
}
