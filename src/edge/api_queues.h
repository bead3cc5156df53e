/* api_queues.h -- the routes of queues and destinations (api_queues.c):
 * each an api_handler of the route table in api.c. */
#ifndef TICKD_API_QUEUES_H
#define TICKD_API_QUEUES_H

#include "edge/api_handler.h"

/* Flow control lives in Redis alone: on the memory store every route of
 * /v1/queues and /v1/destinations answers 501, before anything in the path
 * or the method is looked at. */
api_ready_fn api_queues_ready;

/* {queue}: a queue's name, percent-decoded (400 otherwise); its value
 * becomes the key "q:<name>". {destination}: the rest of the path,
 * percent-decoded, a destination in its one form (400 otherwise, a '/' in
 * it too); its value becomes the key "d:<name>". */
api_param_fn api_queues_param, api_queues_destination_param;

/* GET /v1/queues, GET /v1/destinations; then for one of either (the key
 * its parameter made): GET, PUT, DELETE; POST .../pause, .../resume */
api_handler api_queues_list, api_queues_list_destinations, api_queues_get, api_queues_put,
    api_queues_delete, api_queues_pause, api_queues_resume;

#endif
