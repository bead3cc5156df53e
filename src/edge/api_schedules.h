/* api_schedules.h -- the routes of schedules (api_schedules.c): each an
 * api_handler of the route table in api.c. */
#ifndef TICKD_API_SCHEDULES_H
#define TICKD_API_SCHEDULES_H

#include "edge/api_handler.h"

api_handler api_schedules_add, api_schedules_list, api_schedules_get, api_schedules_replace,
    api_schedules_delete, api_schedules_pause, api_schedules_resume;

/* {schedule}: a schedule's id, sch.<key>; anything else is answered 404
 * "id: no such schedule", whatever follows it or the method. */
api_param_fn api_schedules_param;

#endif
