/* sdnotify.h -- the service manager's readiness protocol (sd_notify(3)),
 * without libsystemd: one datagram to the AF_UNIX socket named by
 * $NOTIFY_SOCKET (a path, or an abstract name written with a leading '@').
 * Without $NOTIFY_SOCKET nothing is sent. */
#ifndef TICKD_SDNOTIFY_H
#define TICKD_SDNOTIFY_H

/* Send state ("READY=1", "STOPPING=1", "STATUS=..."): 0 sent or not asked
 * for, -1 the socket could not be reached (errno). */
int sdnotify(const char *state);

#endif
