/* log.h -- leveled logging to stderr, each line stamped with UTC time and
 * the file:line that logged it. */
#ifndef TICKD_LOG_H
#define TICKD_LOG_H

enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

extern int log_level; /* lines below this level are dropped */

/* Parse "debug", "info", "warn" or "error"; -1 when unknown. */
int log_level_parse(const char *s);

void log_write(int level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define log_debug(...) do { if (log_level <= LOG_DEBUG) log_write(LOG_DEBUG, __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define log_info(...)  do { if (log_level <= LOG_INFO)  log_write(LOG_INFO,  __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define log_warn(...)  do { if (log_level <= LOG_WARN)  log_write(LOG_WARN,  __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define log_error(...) log_write(LOG_ERROR, __FILE__, __LINE__, __VA_ARGS__)

#endif
