/* fuzz_config.c -- the config reader on arbitrary bytes: the input as an ini
 * file (a memfd, read through its /proc path as config_load_file reads any
 * file), then as one config_set call (section, key and value split at the
 * first two newlines), each followed by config_validate. Invariant beyond the
 * sanitizers: a refusal always says why. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static config c;
    char err[512], path[64];

    int fd = memfd_create("fuzz.ini", MFD_CLOEXEC);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    config_defaults(&c);
    err[0] = '\0';
    if (config_load_file(&c, path, err, sizeof(err)) != 0) {
        if (!err[0]) abort();
    } else {
        config_validate(&c, err, sizeof(err));
    }
    close(fd);

    /* section \n key \n value (the value may hold any bytes but NUL) */
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *key = strchr(buf, '\n'), *value = key ? strchr(key + 1, '\n') : NULL;
    if (value) {
        *key++ = '\0';
        *value++ = '\0';
        config_defaults(&c);
        err[0] = '\0';
        if (config_set(&c, buf, key, value, err, sizeof(err)) != 0) {
            if (!err[0]) abort();
        } else {
            config_validate(&c, err, sizeof(err));
        }
    }
    free(buf);
    return 0;
}
