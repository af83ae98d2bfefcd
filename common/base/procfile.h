/* common/base/procfile.h: the "key value" lines of a /proc-style text file
 * (/proc/meminfo's MemAvailable, /proc/vmstat's oom_kill, /proc/stat's cpu
 * lines, /proc/loadavg), the one reader the program's /proc figures share. */
#ifndef DDPBENCH_PROCFILE_H
#define DDPBENCH_PROCFILE_H

#include <stdbool.h>
#include <stddef.h>

/* What follows key on the first line of path that starts with key ("" for
 * the first line), its newline dropped, into out (n bytes); false when the
 * file cannot be read or has no such line. */
bool procfile_value(const char *path, const char *key, char *out, size_t n);

/* Call fn(line, ctx) for every line of path that starts with prefix, its
 * newline dropped (the whole line, prefix and all); the number of lines it
 * was called for, -1 when the file cannot be read. */
int procfile_each(const char *path, const char *prefix, void (*fn)(const char *line, void *ctx),
                  void *ctx);

#endif
