/* api_metrics.h -- what tickd tells of itself (api_metrics.c): each an
 * api_handler of the route table in api.c. */
#ifndef TICKD_API_METRICS_H
#define TICKD_API_METRICS_H

#include "edge/api_handler.h"

/* GET /metrics, GET /v1/stats, GET /healthz */
api_handler api_metrics_scrape, api_metrics_stats, api_metrics_health;

#endif
