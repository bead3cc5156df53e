/* cron_next.c -- prints tickd's cron runs and zone offsets, for the oracle
 * tests (tests/integration/test_cron_oracle.py) to compare with other
 * implementations. Reads one query per line on stdin, answers one line each:
 *
 *   next <tz> <after_ms> <count> <expr...>  ->  ok <ms> <ms> ...  (fewer if none
 *                                               follows: "never")  |  err <message>
 *   offset <tz> <t_s> <t_s> ...             ->  ok <utoff_s> ...   |  err <message>
 *   resolve <tz> <local_s>                  ->  ok <n> <instant> [<instant>]
 *
 * The zone directory is TICKD_ZONEINFO when set. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cron.h"
#include "base/tz.h"

int main(void)
{
    char *line = NULL, err[256];
    size_t cap = 0;
    if (getenv("TICKD_ZONEINFO")) tz_set_dir(getenv("TICKD_ZONEINFO"));
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (getline(&line, &cap, stdin) > 0) {
        line[strcspn(line, "\n")] = '\0';
        char cmd[16], zone[TZ_NAME_MAX + 2];
        int used = 0;
        if (sscanf(line, "%15s %65s %n", cmd, zone, &used) != 2) {
            printf("err bad query\n");
            continue;
        }
        const tz *z = tz_get(zone, err);
        if (!z) {
            printf("err %s\n", err);
            continue;
        }
        char *rest = line + used;
        if (strcmp(cmd, "next") == 0) {
            int64_t after;
            int count, n2 = 0;
            if (sscanf(rest, "%" SCNd64 " %d %n", &after, &count, &n2) != 2) {
                printf("err bad query\n");
                continue;
            }
            cron_expr ce;
            const char *expr = rest + n2;
            if (cron_parse(&ce, expr, strlen(expr), err)) {
                printf("err %s\n", err);
                continue;
            }
            printf("ok");
            for (int i = 0; i < count; i++) {
                if (cron_next(&ce, z, after, &after)) {
                    printf(" never");
                    break;
                }
                printf(" %" PRId64, after);
            }
            printf("\n");
        } else if (strcmp(cmd, "offset") == 0) {
            printf("ok");
            char *end;
            for (long long t = strtoll(rest, &end, 10); end != rest; t = strtoll(rest, &end, 10)) {
                printf(" %d", tz_offset(z, t));
                rest = end;
            }
            printf("\n");
        } else if (strcmp(cmd, "resolve") == 0) {
            int64_t u[2];
            int n = tz_resolve(z, strtoll(rest, NULL, 10), u);
            printf("ok %d %" PRId64, n, u[0]);
            if (n == 2) printf(" %" PRId64, u[1]);
            printf("\n");
        } else {
            printf("err unknown command\n");
        }
    }
    free(line);
    return 0;
}
