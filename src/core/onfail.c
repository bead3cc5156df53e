/* onfail.c -- see onfail.h. */
#include "core/onfail.h"

#include <cjson/cJSON.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "base/util.h"

/* One event: the callback the pool sends, and its timer between attempts. */
typedef struct notice {
    callback j;
    onfail *o;
    struct event *ev;
    struct notice *next, *prev;
} notice;

struct onfail {
    struct event_base *base;
    char *global_url;           /* NULL: none */
    void (*submit)(callback *j, void *priv);
    void *priv;
    notice *waiting;            /* between attempts */
    int pending;                /* every event not yet done */
    int calling;                /* of those, handed to submit */
    log_limit warn;
};

onfail *onfail_create(struct event_base *base, const char *global_url,
                      void (*submit)(callback *j, void *priv), void *priv)
{
    onfail *o = xcalloc(1, sizeof(*o));
    o->base = base;
    o->global_url = global_url && *global_url ? xstrdup(global_url) : NULL;
    o->submit = submit;
    o->priv = priv;
    return o;
}

static void notice_free(notice *n)
{
    n->o->pending--;
    if (n->ev) event_free(n->ev);
    task_spec_free(n->j.spec);
    free(n);
}

char *onfail_body(const callback *j, int64_t now_ms)
{
    char *json = task_spec_json(j->spec, j->id);
    cJSON *task = json ? cJSON_Parse(json) : NULL, *ev = cJSON_CreateObject();
    free(json);
    log_assert(ev);
    if (!task) {
        cJSON_Delete(ev);
        return NULL;
    }
    /* the task as stored, but for what belongs to its receivers alone: its
     * headers may carry their credentials */
    cJSON_DeleteItemFromObjectCaseSensitive(task, "header");
    cJSON_DeleteItemFromObjectCaseSensitive(task, "on_failure");
    /* and its URL without userinfo or query values (doc/security.md: what is
     * redacted where) */
    task_redact_urls(task);
    cJSON_AddStringToObject(ev, "type", j->expired ? ONFAIL_EXPIRED : ONFAIL_EVENT);
    cJSON_AddStringToObject(ev, "id", j->id);
    cJSON_AddItemToObject(ev, "task", task);
    cJSON_AddNumberToObject(ev, "attempts", j->attempt);
    if (j->status_code) cJSON_AddNumberToObject(ev, "last_status_code", (double)j->status_code);
    else cJSON_AddNullToObject(ev, "last_status_code");
    cJSON_AddStringToObject(ev, "last_error", j->err);
    cJSON_AddNumberToObject(ev, "failed_at", (double)now_ms);
    char *s = cJSON_PrintUnformatted(ev);
    log_assert(s);
    cJSON_Delete(ev);
    return s;
}

/* The spec the pool sends for an event: to url with method and the headers
 * given, the body as JSON, and the event's own retry policy. */
static char *onfail_spec(const char *url, const char *method, const cJSON *hdr, const char *body)
{
    cJSON *s = cJSON_CreateObject(), *h = hdr ? cJSON_Duplicate(hdr, 1) : cJSON_CreateObject();
    log_assert(s && h);
    int has_ctype = 0;
    for (const cJSON *e = h->child; e; e = e->next)
        if (strcasecmp(e->string, "Content-Type") == 0) has_ctype = 1;
    if (!has_ctype) cJSON_AddStringToObject(h, "Content-Type", "application/json");
    cJSON_AddStringToObject(s, "callback_url", url);
    cJSON_AddStringToObject(s, "method", method);
    cJSON_AddItemToObject(s, "header", h);
    cJSON_AddStringToObject(s, "req", body);
    cJSON *r = cJSON_AddObjectToObject(s, "retry");
    cJSON_AddNumberToObject(r, "max_attempts", ONFAIL_ATTEMPTS);
    cJSON_AddNumberToObject(r, "backoff_ms", ONFAIL_BACKOFF_MS);
    cJSON_AddNumberToObject(s, "timeout_ms", ONFAIL_TIMEOUT_MS);
    char *out = cJSON_PrintUnformatted(s);
    log_assert(out);
    cJSON_Delete(s);
    return out;
}

void onfail_task_failed(onfail *o, const callback *j, int64_t now_ms)
{
    const task_span *ofs = &j->spec->on_failure;
    cJSON *of = ofs->n ? cJSON_ParseWithLength(ofs->p, ofs->n) : NULL;
    const cJSON *url = cJSON_GetObjectItemCaseSensitive(of, "callback_url");
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(of, "method");
    const char *u = cJSON_IsString(url) ? url->valuestring : o->global_url;
    if (!u) goto done;
    if (o->pending >= ONFAIL_PENDING) {
        log_warn_limited(&o->warn, now_ms, "task %s: %s event dropped: %d events wait already",
                         j->id, ONFAIL_EVENT, o->pending);
        goto done;
    }
    char *body = onfail_body(j, now_ms);
    if (!body) goto done;
    notice *n = xcalloc(1, sizeof(*n));
    n->o = o;
    util_copy(n->j.id, sizeof(n->j.id), j->id);
    util_copy(n->j.event, sizeof(n->j.event), j->expired ? ONFAIL_EXPIRED : ONFAIL_EVENT);
    n->j.due_ms = now_ms;
    n->j.attempt = 1;
    char *spec = onfail_spec(u, cJSON_IsString(method) && cJSON_IsString(url) ? method->valuestring
                                                                             : "POST",
                             cJSON_IsString(url) ? cJSON_GetObjectItemCaseSensitive(of, "header")
                                                 : NULL,
                             body);
    n->j.spec = task_spec_read(spec, strlen(spec));
    free(spec);
    free(body);
    o->pending++;
    o->calling++;
    o->submit(&n->j, o->priv);
done:
    cJSON_Delete(of);
}

static void onfail_again_cb(evutil_socket_t fd, short what, void *arg)
{
    notice *n = arg;
    onfail *o = n->o;
    (void)fd, (void)what;
    if (n->prev) n->prev->next = n->next;
    else o->waiting = n->next;
    if (n->next) n->next->prev = n->prev;
    n->next = n->prev = NULL;
    o->calling++;
    o->submit(&n->j, o->priv);
}

void onfail_on_done(onfail *o, callback *j)
{
    notice *n = container_of(j, notice, j);
    o->calling--;
    /* an event's answers are not kept */
    free(j->answer);
    j->answer = NULL;
    if (j->ok || j->aborted) {
        if (j->aborted)
            log_warn("task %s: %s event not sent: tickd stopped before it was", j->id,
                     ONFAIL_EVENT);
        notice_free(n);
        return;
    }
    if (j->permanent || j->attempt >= ONFAIL_ATTEMPTS) {
        log_warn("task %s: %s event not delivered after %d attempts: %s", j->id, ONFAIL_EVENT,
                 j->attempt, j->err);
        notice_free(n);
        return;
    }
    double jitter = (double)(random() % 1000) / 1000.0;
    int64_t delay = task_backoff_ms(ONFAIL_BACKOFF_MS, j->uncounted ? 1 : j->attempt, jitter);
    if (!j->uncounted) j->attempt++;
    log_debug("task %s: %s event: %s; again in %lld ms", j->id, ONFAIL_EVENT, j->err,
              (long long)delay);
    if (!n->ev) n->ev = evtimer_new(o->base, onfail_again_cb, n);
    log_assert(n->ev);
    n->next = o->waiting;
    n->prev = NULL;
    if (o->waiting) o->waiting->prev = n;
    o->waiting = n;
    struct timeval tv = {(time_t)(delay / 1000), (suseconds_t)(delay % 1000) * 1000};
    evtimer_add(n->ev, &tv);
}

int onfail_calling(const onfail *o)
{
    return o ? o->calling : 0;
}

void onfail_free(onfail *o)
{
    if (!o) return;
    if (o->waiting)
        log_warn("%d %s event%s waiting for another attempt dropped at exit",
                 o->pending - o->calling, ONFAIL_EVENT, o->pending - o->calling == 1 ? "" : "s");
    while (o->waiting) {
        notice *n = o->waiting;
        o->waiting = n->next;
        notice_free(n);
    }
    free(o->global_url);
    free(o);
}
