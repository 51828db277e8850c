/*
** real_file.h: where the tests on real models find their files.
**
** tests/models/fetch.sh puts them in ${RADIANCE_MODELS:-~/.cache/radiance/models},
** outside the repository.  A missing file makes the calling cmocka test say
** SKIPPED and why; with CI=true it fails instead, so a CI run cannot pass
** without having read the files.  Include after <cmocka.h>.
*/
#ifndef RAD_TESTS_REAL_FILE_H
#define RAD_TESTS_REAL_FILE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The cached file `name`, or NULL after skipping (or failing, under CI). */
static const char *real_file(const char *name)
{
    static char path[1024];
    const char *dir = getenv("RADIANCE_MODELS");
    char fallback[900];
    if (!dir) {
        snprintf(fallback, sizeof fallback, "%s/.cache/radiance/models", getenv("HOME") ? getenv("HOME") : "");
        dir = fallback;
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (access(path, R_OK) == 0) return path;
    const char *ci = getenv("CI");
    if (ci && (strcmp(ci, "true") == 0 || strcmp(ci, "1") == 0))
        fail_msg("%s is missing and CI is set: run tests/models/fetch.sh first", path);
    printf("    SKIPPED: %s is missing (run tests/models/fetch.sh to fetch it)\n", path);
    skip();
    return NULL;
}

#endif /* RAD_TESTS_REAL_FILE_H */
