/* ui_assets.h -- the console's files, built into tickd (build/gen/ui_assets.c,
 * made from web/ by scripts/ui_c.py), for src/edge/ui.c to serve. */
#ifndef TICKD_UI_ASSETS_H
#define TICKD_UI_ASSETS_H

#include <stddef.h>

typedef struct ui_asset {
    const char *name;             /* "index.html", or "app.<hash>.js" */
    const char *type;             /* Content-Type */
    const unsigned char *data;    /* as is */
    size_t len;
    const unsigned char *gz;      /* gzipped */
    size_t gzlen;
} ui_asset;

/* Ends with a row whose name is NULL. */
extern const ui_asset ui_assets[];
/* What all of them weigh gzipped, in bytes. */
extern const size_t ui_assets_gzip_total;

#endif
