/* api_tasks.h -- the routes of tasks (api_tasks.c): each an api_handler of
 * the route table in api.c. */
#ifndef TICKD_API_TASKS_H
#define TICKD_API_TASKS_H

#include <stddef.h>

#include "edge/api_handler.h"

api_handler api_tasks_add, api_tasks_add_batch, api_tasks_get, api_tasks_cancel,
    api_tasks_list, api_tasks_retry, api_tasks_run, api_tasks_retry_matching;

/* {task}: a task's id that an action names; one too long for an id names
 * no route (404 for the path, whatever the method). */
api_param_fn api_tasks_param;

/* A stored task for GET: the spec plus id, status, attempts and the last
 * failures; a malloc'd JSON string, or NULL if spec or state is not JSON. */
char *api_tasks_render(const char *id, const char *spec, const char *state);
/* The status word of a stored state ("scheduled" when it has none). */
void api_tasks_state_status(const char *state, char *out, size_t outlen);

#endif
