/* common/base/procfile.c: one "key value" line of a /proc-style file (see
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
