/* api_console.h -- what the web console reads (api_console.c): each an
 * api_handler of the route table in api.c. */
#ifndef TICKD_API_CONSOLE_H
#define TICKD_API_CONSOLE_H

#include "edge/api_handler.h"

/* GET /v1/history, GET /v1/cluster, GET /v1/schedules:preview */
api_handler api_console_history, api_console_cluster, api_console_preview;

#endif
