/* tickd -- delayed HTTP callbacks ("call this URL at time T") on Redis.
 *
 * main wires the modules: config -> store (Redis, or memory with --store
 * memory) -> sched (tick, claim, fire wheel, settle) -> dispatch (worker
 * threads making the callbacks) and api (HTTP), all on one libevent loop
 * except the dispatch workers. */
#include <curl/curl.h>
#include <errno.h>
#include <event2/event.h>
#include <event2/thread.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "edge/api.h"
#include "base/config.h"
#include "base/jarena.h"
#include "delivery/cbtls.h"
#include "delivery/dispatch.h"
#include "edge/http_server.h"
#include "base/log.h"
#include "base/metrics.h"
#include "delivery/netpolicy.h"
#include "core/history.h"
#include "core/onfail.h"
#include "core/replica.h"
#include "core/schedule_runner.h"
#include "core/scheduler.h"
#include "base/sdnotify.h"
#include "store/store.h"
#include "base/util.h"
#include "delivery/webhook.h"

#define TICKD_VERSION "1.0.0"

/* An installed tickd (make install) reads this file when no -c is given and
 * it exists; a tickd built in the tree reads none. */
#ifdef TICKD_SYSCONFDIR
#define TICKD_DEFAULT_CONFIG TICKD_SYSCONFDIR "/tickd/tickd.ini"
#else
#define TICKD_DEFAULT_CONFIG ""
#endif

static const char usage[] =
    "usage: tickd [options]\n"
    "  -c, --config FILE        ini file (see conf/tickd.ini); without -c: "
    TICKD_DEFAULT_CONFIG "%s\n"
    "      --listen HOST:PORT   HTTP API address (server.listen)\n"
    "      --redis HOST:PORT[,HOST:PORT...]  Redis server or cluster seeds (redis.nodes)\n"
    "      --store redis|memory memory: no Redis, NOT durable (development, tests)\n"
    "      --print-config       print the default config file and exit\n"
    "      --gen-secret         print a new callback signing secret and exit\n"
    "  -v, --version            print the version and exit\n"
    "  -h, --help               this text\n"
    "Every key can also be set as TICKD_<SECTION>_<KEY> in the environment.\n"
    "Precedence: built-in defaults < the file < TICKD_ variables < --listen, --redis, --store.\n";

static void tickd_usage(FILE *f)
{
    fprintf(f, usage, TICKD_DEFAULT_CONFIG[0] ? " when it exists" : "none");
}

typedef struct tickd {
    config cfg;
    struct event_base *base;
    store *st;
    sched *sc;
    runner *run;
    dispatch *d;
    api *a;
    netpolicy np;               /* where callbacks may connect */
    webhook_keys *keys;         /* signing callbacks; NULL: unsigned */
    cbtls *tls;                 /* callback TLS and proxy; NULL: libcurl's defaults */
    onfail *of;                 /* task.failed events */
    struct event *sig_term, *sig_int, *stop_ev;
    struct event *sig_hup, *sig_usr1, *sig_usr2;
    const char *file, *flag_listen, *flag_redis, *flag_store; /* as given, read again on SIGHUP */
    struct event *store_ev;     /* the next try to reach the store */
    int64_t store_wait_ms;      /* and the pause before the one after */
    /* A try first probes Redis on a thread of its own (blocking connects
     * and reads, redis.timeout_ms each), so that the loop goes on answering
     * 503 while a Redis that drops or never answers is waited for. */
    pthread_t probe_th;
    int probing;
    struct event *probe_ev;     /* the probe ended: probe_fd woken (util_wake) */
    int probe_fd;
    int probe_rc, probe_fatal;
    char probe_err[512];
    char scripts[PATH_MAX + 32];
    int workers;
    int rc;                     /* the exit status */
    int64_t stop_started_ms, grace_ends_ms;
    int64_t start_ms;           /* wall clock */
    history *hist;              /* the console's history of outcomes */
    replica *rep;               /* this replica's entry in the registry */
} tickd;

/* The pool's answers: an event's goes to onfail, a task's to the
 * scheduler, whose job holds the callback. */
static void tickd_done(callback *cb, void *priv)
{
    if (cb->event[0]) onfail_on_done(((tickd *)priv)->of, cb);
    else sched_on_done(((tickd *)priv)->sc, sched_job_of(cb));
}

static void tickd_failed(const callback *cb, void *priv)
{
    onfail_task_failed(((tickd *)priv)->of, cb, util_realtime_ms());
}

/* a queue's or destination's settings were written through this replica */
static void tickd_flow_written(void *priv)
{
    tickd *t = priv;
    sched_flow_refresh(t->sc);
    sched_flow_pump(t->sc);
}

static void tickd_submit(job *j, void *priv)
{
    dispatch_submit(((tickd *)priv)->d, &j->cb);
}

static void tickd_warm(callback *const *cbs, int n, void *priv)
{
    dispatch_warm(((tickd *)priv)->d, cbs, n);
}

static void tickd_schedule_changed(int bucket, void *priv)
{
    runner_kick(((tickd *)priv)->run, bucket);
}

/* A task.failed event, which may come after the pool has stopped (its
 * task's end recorded late in a stop): then it goes back, aborted. */
static void tickd_submit_event(callback *j, void *priv)
{
    tickd *t = priv;
    if (t->d) {
        dispatch_submit(t->d, j);
        return;
    }
    j->aborted = 1;
    onfail_on_done(t->of, j);
}

static void tickd_stats(void *priv, cJSON *obj)
{
    tickd *t = priv;
    sched_stats(t->sc, obj);
    if (t->run) runner_stats(t->run, obj);
    if (t->d) {
        cJSON_AddNumberToObject(obj, "hosts", (double)dispatch_hosts(t->d));
        cJSON_AddNumberToObject(obj, "transfers_kept", (double)dispatch_kept(t->d));
        cJSON_AddNumberToObject(obj, "callback_naps", (double)dispatch_naps(t->d));
    }
    history_stats(t->hist, obj);
    cJSON_AddNumberToObject(obj, "retention_ms", (double)t->cfg.retention_ms);
    cJSON_AddNumberToObject(obj, "failed_retention_ms", (double)t->cfg.failed_retention_ms);
}

static void tickd_replica_gauges(void *priv, int64_t *inflight, int64_t *held)
{
    tickd *t = priv;
    *inflight = sched_calling(t->sc);
    *held = sched_held(t->sc);
}

static void tickd_gauges(void *priv, metrics_now *now)
{
    tickd *t = priv;
    now->inflight = sched_calling(t->sc);
    now->held = sched_held(t->sc);
    now->flow_waiting = sched_flow_waiting(t->sc);
    now->start_ms = t->start_ms;
    now->version = TICKD_VERSION;
    now->store = t->cfg.store;
}

/* ---- shutdown ---------------------------------------------------------- */

static int tickd_calling(const tickd *t)
{
    return sched_calling(t->sc) + onfail_calling(t->of);
}

static void tickd_stop_poll(evutil_socket_t fd, short what, void *arg)
{
    tickd *t = arg;
    int64_t now = util_mono_ms();
    (void)fd, (void)what;
    /* the pool stays while attempts are being recorded: a task's end recorded
     * now sends its task.failed event through it */
    if (t->d && ((tickd_calling(t) == 0 && sched_idle(t->sc)) || now >= t->grace_ends_ms)) {
        if (tickd_calling(t))
            log_warn("grace period over: %d callback%s still running, left to their leases",
                     tickd_calling(t), tickd_calling(t) == 1 ? "" : "s");
        dispatch_free(t->d); /* aborted jobs come back through tickd_done */
        t->d = NULL;
    }
    int idle = !t->d && api_busy(t->a) == 0 && sched_idle(t->sc) && runner_idle(t->run);
    if (idle) {
        /* every outcome counted: the last counts written, the entry removed */
        history_stop(t->hist);
        replica_leave(t->rep);
        idle = history_idle(t->hist) && replica_idle(t->rep);
    }
    /* store calls that cannot complete are not waited for forever */
    if (idle || now >= t->grace_ends_ms + 10000) {
        if (!idle) log_warn("exiting with store calls unanswered");
        event_base_loopexit(t->base, NULL);
    }
}

static void tickd_signal(evutil_socket_t sig, short what, void *arg)
{
    tickd *t = arg;
    (void)what;
    if (t->stop_ev) {
        log_warn("second signal: exiting now");
        exit(1);
    }
    if (!t->sc) { /* still waiting for the store: nothing runs yet */
        log_info("%s: stopping before the store was reached", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        event_base_loopexit(t->base, NULL);
        return;
    }
    log_info("%s: shutting down (grace %lld ms)", sig == SIGTERM ? "SIGTERM" : "SIGINT",
             (long long)t->cfg.shutdown_grace_ms);
    sdnotify("STOPPING=1");
    api_stop_accepting(t->a);
    sched_stop(t->sc);
    runner_stop(t->run);
    t->grace_ends_ms = util_mono_ms() + t->cfg.shutdown_grace_ms;
    t->stop_ev = event_new(t->base, -1, EV_PERSIST, tickd_stop_poll, t);
    struct timeval tv = {0, 20000};
    event_add(t->stop_ev, &tv);
}

/* ---- signals that do not stop ----------------------------------------- */

/* The configuration as at start: defaults < the file < TICKD_ variables <
 * the flags. 0, or -1 + err. */
static int tickd_config_read(const tickd *t, config *c, char *err, size_t errlen)
{
    config_defaults(c);
    if ((t->file && config_load_file(c, t->file, err, errlen) != 0) ||
        config_load_env(c, err, errlen) != 0 ||
        (t->flag_listen && config_set(c, "server", "listen", t->flag_listen, err, errlen) != 0) ||
        (t->flag_redis && config_set(c, "redis", "nodes", t->flag_redis, err, errlen) != 0) ||
        (t->flag_store && config_set(c, "server", "store", t->flag_store, err, errlen) != 0))
        return -1;
    return config_validate(c, err, errlen);
}

/* SIGHUP: the configuration is read again; what can change under a running
 * tickd does (the API tokens, log_level, access_log), the rest is named as
 * waiting for a restart. One that does not load, or would open an API that
 * was guarded, changes nothing. Said whatever log_level: an operator asked. */
static void tickd_reload(evutil_socket_t sig, short what, void *arg)
{
    tickd *t = arg;
    config *c = xmalloc(sizeof(*c));
    char err[512], rest[600];
    (void)sig, (void)what;
    if (t->stop_ev) {
        log_write(LOG_INFO, __FILE__, __LINE__, "SIGHUP: ignored while shutting down");
    } else if (tickd_config_read(t, c, err, sizeof(err)) != 0) {
        log_error("SIGHUP: configuration not reloaded, nothing changed: %s", err);
    } else if (t->cfg.api_token[0] && !c->api_token[0]) {
        log_error("SIGHUP: configuration not reloaded, nothing changed: server.api_token is no "
                  "longer set (restart tickd to open the API)");
    } else {
        int nread, ntok = api_set_tokens(t->a, c->api_token, c->read_tokens, &nread);
        char reads[64] = "";
        if (nread)
            snprintf(reads, sizeof(reads), " and %d read-only token%s", nread,
                     nread == 1 ? "" : "s");
        log_level = log_level_parse(c->log_level);
        http_server_set_access_log(api_http(t->a), (int)c->access_log);
        memcpy(t->cfg.api_token, c->api_token, sizeof(c->api_token));
        memcpy(t->cfg.read_tokens, c->read_tokens, sizeof(c->read_tokens));
        memcpy(t->cfg.log_level, c->log_level, sizeof(c->log_level));
        t->cfg.access_log = c->access_log;
        config_diff(&t->cfg, c, rest, sizeof(rest));
        log_write(LOG_INFO, __FILE__, __LINE__, "SIGHUP: configuration reloaded: %d API token%s%s, "
                  "log_level %s, access_log %s%s%s", ntok, ntok == 1 ? "" : "s", reads,
                  c->log_level,
                  c->access_log ? "on" : "off", *rest ? "; changed, taking effect at the next "
                  "start: " : "", rest);
    }
    free(c);
}

/* SIGUSR1: one status line; SIGUSR2: nothing (said, so that it is seen). */
static void tickd_status(evutil_socket_t sig, short what, void *arg)
{
    tickd *t = arg;
    (void)what;
    if (sig != SIGUSR1) {
        log_write(LOG_INFO, __FILE__, __LINE__, "SIGUSR2: ignored (SIGUSR1 logs the status, "
                  "SIGHUP reloads the configuration)");
        return;
    }
    long long up_s = (util_realtime_ms() - t->start_ms) / 1000, waiting;
    int busy = api_busy(t->a);
    if (!t->sc) {
        log_write(LOG_INFO, __FILE__, __LINE__, "status: up %lld s, waiting for the store; %d API "
                  "request%s being answered; store %s, log_level %s", up_s, busy,
                  busy == 1 ? "" : "s", t->cfg.store, t->cfg.log_level);
        return;
    }
    int calling = tickd_calling(t), held = sched_held(t->sc);
    waiting = sched_flow_waiting(t->sc); /* -1: no flow control (the memory store) */
    log_write(LOG_INFO, __FILE__, __LINE__, "status: up %lld s, %s; %d callback%s in flight, %d "
              "task%s held, %lld waiting for flow control, %d API request%s being answered; "
              "store %s, log_level %s", up_s, t->stop_ev ? "shutting down" : "running", calling,
              calling == 1 ? "" : "s", held, held == 1 ? "" : "s", waiting < 0 ? 0 : waiting,
              busy, busy == 1 ? "" : "s", t->cfg.store, t->cfg.log_level);
}

/* ---- start-up ---------------------------------------------------------- */

/* A task's callback_url naming a literal address the policy refuses (or
 * tickd's own API) is refused at POST. */
static int tickd_url_check(void *priv, const char *host, int port, char *why, size_t whylen)
{
    char r[160];
    if (netpolicy_check_host(priv, host, port, r, sizeof(r)) == 0) return 0;
    snprintf(why, whylen, NETPOLICY_DENIED ": %s", r);
    return -1;
}

/* Raise the soft descriptor limit to the hard one, and return how many API
 * connections may be open at once: server.max_connections, but never so
 * many that Redis and the callbacks are left without descriptors. Kept for
 * them: 256 (Redis nodes, the loop, logs) + server.max_inflight (one
 * connection per callback in flight), at most half the limit. */
static int tickd_api_connections(const config *c)
{
    struct rlimit rl;
    int64_t nofile = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        if (rl.rlim_cur < rl.rlim_max) {
            struct rlimit want = {rl.rlim_max, rl.rlim_max};
            FILE *f;
            unsigned long nr_open;
            /* an unlimited hard limit is the kernel's fs.nr_open */
            if (rl.rlim_max == RLIM_INFINITY && (f = fopen("/proc/sys/fs/nr_open", "r"))) {
                if (fscanf(f, "%lu", &nr_open) == 1) want.rlim_cur = (rlim_t)nr_open;
                fclose(f);
            }
            if (setrlimit(RLIMIT_NOFILE, &want) == 0) rl = want;
        }
        nofile = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 30) ? (1 << 30)
                                                                        : (int64_t)rl.rlim_cur;
    }
    int64_t reserve = 256 + c->max_inflight;
    if (reserve > nofile / 2) reserve = nofile / 2;
    int64_t n = nofile - reserve < c->max_connections ? nofile - reserve : c->max_connections;
    if (n < c->max_connections)
        log_info("server.max_connections: %lld, but %lld open files (RLIMIT_NOFILE) with %lld kept "
                 "for Redis and callbacks allow %lld API connections",
                 (long long)c->max_connections, (long long)nofile, (long long)reserve,
                 (long long)n);
    return n < 1 ? 1 : (int)n;
}

static void tickd_scripts_dir(const config *c, char *out, size_t outlen)
{
    char exe[PATH_MAX];
    struct stat sb;
    if (c->scripts_dir[0]) {
        snprintf(out, outlen, "%s", c->scripts_dir);
        return;
    }
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *dir = dirname(exe);
    snprintf(out, outlen, "%s/../lua", dir);
    if (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode)) return;
    snprintf(out, outlen, "%s/../share/tickd/lua", dir);
}

static int tickd_args(tickd *t, int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"listen", required_argument, NULL, 'l'},
        {"redis", required_argument, NULL, 'r'},  {"store", required_argument, NULL, 's'},
        {"print-config", no_argument, NULL, 'p'}, {"version", no_argument, NULL, 'v'},
        {"gen-secret", no_argument, NULL, 'g'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    char err[512];
    int o;

    config_defaults(&t->cfg);
    while ((o = getopt_long(argc, argv, "c:vh", opts, NULL)) != -1) {
        switch (o) {
        case 'c': t->file = optarg; break;
        case 'l': t->flag_listen = optarg; break;
        case 'r': t->flag_redis = optarg; break;
        case 's': t->flag_store = optarg; break;
        case 'p': config_print_defaults(stdout); exit(0);
        case 'g': {
            char sec[64];
            if (webhook_gen_secret(sec, sizeof(sec)) != 0) {
                fprintf(stderr, "tickd: --gen-secret: no random bytes from the system\n");
                exit(1);
            }
            printf("%s\n", sec);
            exit(0);
        }
        case 'v': printf("tickd %s\n", TICKD_VERSION); exit(0);
        case 'h': tickd_usage(stdout); exit(0);
        default: tickd_usage(stderr); return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tickd: unexpected argument: %s\n", argv[optind]);
        tickd_usage(stderr);
        return -1;
    }
    if (!t->file && TICKD_DEFAULT_CONFIG[0] && access(TICKD_DEFAULT_CONFIG, F_OK) == 0)
        t->file = TICKD_DEFAULT_CONFIG;
    if (tickd_config_read(t, &t->cfg, err, sizeof(err)) != 0 ||
        netpolicy_init(&t->np, t->cfg.deny, t->cfg.allow, err, sizeof(err)) != 0 ||
        webhook_keys_parse(t->cfg.signing_secrets, &t->keys, err, sizeof(err)) != 0) {
        fprintf(stderr, "tickd: config: %s\n", err);
        return -1;
    }
    return 0;
}

/* The store and the scheduler ready: everything else starts. 0, or -1 +
 * err. */
static int tickd_run(tickd *t, char *err, size_t errlen)
{
    if (!(t->d = dispatch_create(t->base, t->workers, (int)t->cfg.host_connections,
                                 t->cfg.keepalive_ms, t->tls, tickd_done, t, err, errlen)))
        return -1;
    dispatch_set_hosts_max(t->d, (long)t->cfg.hosts_max);
    dispatch_set_edge(t->d, &t->np, t->keys);
    sched_set_submit(t->sc, tickd_submit, t);
    sched_set_warm(t->sc, tickd_warm, t);
    t->of = onfail_create(t->base, t->cfg.on_failure_url, tickd_submit_event, t);
    sched_set_failed(t->sc, tickd_failed, t);
    t->run = runner_create(t->base, t->st, &t->cfg);
    api_set_store(t->a, t->st);
    sched_start(t->sc);
    runner_start(t->run);
    char host[256], addr[300];
    snprintf(host, sizeof(host), "%.*s", (int)(strrchr(t->cfg.listen, ':') - t->cfg.listen),
             t->cfg.listen);
    snprintf(addr, sizeof(addr), "%s:%d", host, api_port(t->a));
    t->hist = history_create(t->base, t->st);
    t->rep = replica_create(t->base, t->st, addr, TICKD_VERSION, t->start_ms,
                            tickd_replica_gauges, t);
    log_info("tickd %s listening on http://%s:%d (%d dispatch worker%s, store %s)",
             TICKD_VERSION, host, api_port(t->a), t->workers, t->workers == 1 ? "" : "s",
             t->cfg.store);
    /* listening, the store reached (the watermarks were read), the
     * scheduler started: a service manager may call tickd up (it was told
     * so already, with a status, if the store kept it waiting) */
    if (sdnotify("READY=1\nSTATUS=serving") != 0)
        log_warn("NOTIFY_SOCKET=%s: readiness not sent: %s", getenv("NOTIFY_SOCKET"),
                 strerror(errno));
    return 0;
}

/* A try to reach the store. One that may succeed later (Redis down, a
 * cluster failing over, a node loading) is tried again, the pause doubling
 * up to 5 s; one that cannot (a refused password, another keyspace's bucket
 * count, an evicting Redis) ends tickd with status 2. */
static void *tickd_probe_main(void *arg)
{
    tickd *t = arg;
    t->probe_rc = store_redis_probe(&t->cfg, &t->probe_fatal, t->probe_err,
                                    sizeof(t->probe_err));
    util_wake(t->probe_fd);
    return NULL;
}

static void tickd_store_wait(tickd *t, const char *err);
static void tickd_store_create(tickd *t);

static void tickd_probe_done(evutil_socket_t fd, short what, void *arg)
{
    tickd *t = arg;
    (void)what;
    util_wake_take(fd);
    pthread_join(t->probe_th, NULL);
    t->probing = 0;
    if (t->stop_ev || t->rc) return;
    if (t->probe_rc == 0) {
        tickd_store_create(t);
    } else if (t->probe_fatal) {
        log_error("%s", t->probe_err);
        t->rc = 2;
        event_base_loopexit(t->base, NULL);
    } else {
        tickd_store_wait(t, t->probe_err);
    }
}

static void tickd_store_try(evutil_socket_t fd, short what, void *arg)
{
    tickd *t = arg;
    (void)fd, (void)what;
    if (strcmp(t->cfg.store, "memory") == 0) {
        tickd_store_create(t);
        return;
    }
    if (t->probe_ev && event_add(t->probe_ev, NULL) == 0) {
        if (pthread_create(&t->probe_th, NULL, tickd_probe_main, t) == 0) {
            t->probing = 1;
            return;
        }
        event_del(t->probe_ev);
    }
    tickd_store_create(t); /* no thread: the try blocks the loop, as it can */
}

static void tickd_store_create(tickd *t)
{
    char err[512];
    int fatal = 0;
    if (strcmp(t->cfg.store, "memory") == 0) {
        log_warn("store = memory: tasks live in this process only and are lost on exit");
        t->st = store_memory_create(t->base, &t->cfg);
    } else {
        t->st = store_redis_create(t->base, &t->cfg, t->scripts, &fatal, err, sizeof(err));
    }
    if (t->st && !(t->sc = sched_create(t->base, t->st, &t->cfg, err, sizeof(err)))) {
        /* its watermarks not read: a node lost on the way */
        store_close(t->st);
        store_free(t->st);
        t->st = NULL;
    } else if (t->st) {
        if (tickd_run(t, err, sizeof(err)) == 0) return;
        fatal = 1;
    }
    if (fatal) {
        log_error("%s", err);
        t->rc = 2;
        event_base_loopexit(t->base, NULL);
        return;
    }
    tickd_store_wait(t, err);
}

static void tickd_store_wait(tickd *t, const char *err)
{
    log_warn("store not reachable yet: %s; trying again in %lld ms (the API on port %d "
             "answers 503 until then)", err, (long long)t->store_wait_ms, api_port(t->a));
    api_set_waiting(t->a, err);
    /* up, and saying why it cannot serve yet: a service manager that waited
     * for the store would hold the boot (or a package's install) for as long
     * as Redis is away, then restart tickd in a loop */
    char status[600];
    snprintf(status, sizeof(status), "READY=1\nSTATUS=waiting for the store: %.500s", err);
    sdnotify(status);
    struct timeval tv = {t->store_wait_ms / 1000, (t->store_wait_ms % 1000) * 1000};
    evtimer_add(t->store_ev, &tv);
    if ((t->store_wait_ms *= 2) > 5000) t->store_wait_ms = 5000;
}

/* The main loop's event base. Its timers run on libevent's default coarse
 * clock, a kernel tick wide (4 ms here): timeouts, ticks and gathering
 * windows need no more. The fire wheel, which does, has a timerfd of its own
 * set to the microsecond (scheduler.c, sched_wheel_arm). libevent's precise
 * timer (EVENT_BASE_FLAG_PRECISE_TIMER) would set a timerfd of its own
 * before every epoll_wait: a system call each loop turn, 0.4 a callback in
 * a burst, where the wheel's is set when its next due time changes. */
static struct event_base *tickd_base(void)
{
    struct event_config *cfg = event_config_new();
    if (!cfg) return NULL;
    /* No lock: only this thread calls into it (the dispatch threads and the
     * store probe wake it through an eventfd, util_wake). With the lock,
     * each event_add, event_del and activation took a mutex: twelve a
     * callback. */
    /* The changelist: an event added and deleted in one loop turn (hiredis
     * arms a connection's write event with each command, and the store
     * writes the turn's commands at its end: rcluster.c, rc_flush_cb)
     * costs no epoll_ctl, and the rest are made once, when the loop polls.
     * libevent warns against it for descriptors cloned by dup(): tickd
     * makes none. */
    event_config_set_flag(cfg, EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
    struct event_base *base = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return base;
}

int main(int argc, char **argv)
{
    static tickd t;
    char err[512];
    int rc = 1;

    t.start_ms = util_realtime_ms();
    t.probe_fd = -1;
    if (tickd_args(&t, argc, argv) != 0) return 2;
    log_level = log_level_parse(t.cfg.log_level);
    log_json = strcmp(t.cfg.log_format, "json") == 0;
    signal(SIGPIPE, SIG_IGN);
    jarena_init(); /* cJSON's hooks, before any thread uses cJSON */
    /* until the loop handles them (below): not fatal while starting */
    signal(SIGHUP, SIG_IGN), signal(SIGUSR1, SIG_IGN), signal(SIGUSR2, SIG_IGN);
    int api_conns = tickd_api_connections(&t.cfg);
    /* three priorities: the fire wheel's timer (0) runs before API
     * requests, claims and completions (1, every other event's) that are
     * ready at the same time; the callback client's nap (2) only in a turn
     * that has nothing else to run (h1.c) */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || evthread_use_pthreads() != 0 ||
        !(t.base = tickd_base()) || event_base_priority_init(t.base, 3) != 0) {
        log_error("cannot initialise libcurl or libevent");
        return 1;
    }
    srandom((unsigned)time(NULL) ^ (unsigned)getpid());
    if (cbtls_create(&t.cfg, &t.tls, err, sizeof(err)) != 0) {
        fprintf(stderr, "tickd: config: %s\n", err);
        curl_global_cleanup();
        event_base_free(t.base);
        return 2;
    }

    t.workers = t.cfg.workers ? (int)t.cfg.workers : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (t.workers < 1) t.workers = 1;
    /* The API first: while the store cannot be reached it answers 503 (and
     * /healthz says why), so a start in the middle of an incident comes up
     * by itself once Redis does. */
    if (!(t.a = api_create(t.base, t.cfg.listen, t.cfg.max_body, t.cfg.idle_timeout_ms,
                           t.cfg.api_token, t.cfg.read_tokens, NULL, tickd_stats, &t, err, sizeof(err)))) {
        log_error("%s", err);
        goto done;
    }
    api_on_schedule(t.a, tickd_schedule_changed, &t);
    api_on_metrics(t.a, tickd_gauges, &t);
    api_on_flow(t.a, tickd_flow_written, &t);
    http_server_set_access_log(api_http(t.a), (int)t.cfg.access_log);
    {
        char lhost[256];
        const char *colon = strrchr(t.cfg.listen, ':');
        snprintf(lhost, sizeof(lhost), "%.*s", (int)(colon - t.cfg.listen), t.cfg.listen);
        netpolicy_set_self(&t.np, lhost, api_port(t.a));
        task_set_url_check(tickd_url_check, &t.np);
        /* checked as a task's callback_url, now that the policy knows the API's port */
        if (t.cfg.on_failure_url[0] &&
            task_url_valid(t.cfg.on_failure_url, err, sizeof(err)) != 0) {
            fprintf(stderr, "tickd: config: callback.on_failure_url: %s\n",
                    strncmp(err, "callback_url: ", 14) == 0 ? err + 14 : err);
            rc = 2;
            goto done;
        }
    }
    http_server_set_limits(api_http(t.a), api_conns, t.cfg.header_timeout_ms,
                           t.cfg.body_timeout_ms);
    t.sig_term = evsignal_new(t.base, SIGTERM, tickd_signal, &t);
    t.sig_int = evsignal_new(t.base, SIGINT, tickd_signal, &t);
    t.sig_hup = evsignal_new(t.base, SIGHUP, tickd_reload, &t);
    t.sig_usr1 = evsignal_new(t.base, SIGUSR1, tickd_status, &t);
    t.sig_usr2 = evsignal_new(t.base, SIGUSR2, tickd_status, &t);
    event_add(t.sig_term, NULL);
    event_add(t.sig_int, NULL);
    event_add(t.sig_hup, NULL), event_add(t.sig_usr1, NULL), event_add(t.sig_usr2, NULL);
    tickd_scripts_dir(&t.cfg, t.scripts, sizeof(t.scripts));
    t.store_ev = evtimer_new(t.base, tickd_store_try, &t);
    t.probe_fd = util_wake_fd();
    if (t.probe_fd >= 0) t.probe_ev = event_new(t.base, t.probe_fd, EV_READ, tickd_probe_done, &t);
    t.store_wait_ms = 250;
    t.rc = 0;
    tickd_store_try(-1, 0, &t);
    if (t.rc == 0) event_base_dispatch(t.base);
    if (t.rc == 0) log_info("stopped");
    rc = t.rc;
done:
    if (t.d) dispatch_free(t.d);
    onfail_free(t.of); /* after the pool: it hands back the events it held */
    /* before what its callbacks reach: store calls still waiting (a forced
     * exit) fail as the store closes, into the scheduler and the API
     * (requests answered 503) */
    if (t.st) store_close(t.st);
    history_free(t.hist); /* after the close answered their writes */
    replica_free(t.rep);
    sched_free(t.sc);
    runner_free(t.run);
    store_free(t.st);
    if (t.a) api_free(t.a);
    if (t.sig_term) event_free(t.sig_term);
    if (t.sig_int) event_free(t.sig_int);
    if (t.sig_hup) event_free(t.sig_hup), event_free(t.sig_usr1), event_free(t.sig_usr2);
    if (t.stop_ev) event_free(t.stop_ev);
    if (t.probing) pthread_join(t.probe_th, NULL); /* its try ends within redis.timeout_ms */
    if (t.store_ev) event_free(t.store_ev);
    if (t.probe_ev) event_free(t.probe_ev);
    if (t.probe_fd >= 0) close(t.probe_fd);
    event_base_free(t.base);
    netpolicy_free(&t.np);
    webhook_keys_free(t.keys);
    cbtls_free(t.tls);
    curl_global_cleanup();
    return rc;
}
