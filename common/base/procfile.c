/* common/base/procfile.c: the "key value" lines of a /proc-style file (see
 * procfile.h). */
#include "common/base/procfile.h"

#include <stdio.h>
#include <string.h>

bool procfile_value(const char *path, const char *key, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char line[512];
    size_t klen = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0) {
            line[strcspn(line, "\n")] = 0;
            snprintf(out, n, "%s", line + klen);
            found = true;
        }
    fclose(f);
    return found;
}

int procfile_each(const char *path, const char *prefix, void (*fn)(const char *line, void *ctx),
                  void *ctx)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[512];
    size_t plen = strlen(prefix);
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, prefix, plen) == 0) {
            line[strcspn(line, "\n")] = 0;
            fn(line, ctx);
            n++;
        }
    fclose(f);
    return n;
}
