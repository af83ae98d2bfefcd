/* common/report/report_env.c: the machine a run ran on, for --json's "environment":
 * device names (CPU model from /proc/cpuinfo, GPU model from the NVIDIA
 * driver's files, never from CUDA: this process may fork DDP ranks later),
 * the BLAS library and the versions of the libraries built in. */
#include <ctype.h>
#include <dirent.h>
#include <openblas_config.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "device/backend.h"
#include "report/report.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef HAVE_NCCL
#include <nccl.h>
#endif

/* The value of the first "key<spaces>: value" line of a small text file. */
static int read_field(const char *path, const char *key, char *out, size_t n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[512];
    size_t klen = strlen(key);
    int rc = -1;
    /* bounded: /proc/cpuinfo grows with the cores, the answer is near the top */
    for (int i = 0; i < 4096 && fgets(line, sizeof line, f); i++) {
        if (strncmp(line, key, klen) != 0)
            continue;
        char *p = line + klen;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ':')
            continue;
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t l = strlen(p);
        while (l > 0 && isspace((unsigned char)p[l - 1]))
            p[--l] = 0;
        snprintf(out, n, "%s", p);
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}

const char *report_cpu_model(void)
{
    static char model[128];
    static int done;
    if (!done) {
        if (read_field("/proc/cpuinfo", "model name", model, sizeof model) != 0)
            model[0] = 0;
        done = 1;
    }
    return model;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* GPU `index` in PCI bus order, from /proc/driver/nvidia/gpus/<bus>/information.
 * CUDA numbers GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID; on the
 * usual machine of identical GPUs the names agree either way. */
static int gpu_name(int index, char *out, size_t n)
{
    const char *dir = "/proc/driver/nvidia/gpus";
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char *names[64];
    int k = 0;
    struct dirent *e;
    while ((e = readdir(d)) && k < 64)
        if (e->d_name[0] != '.')
            names[k++] = strdup(e->d_name);
    closedir(d);
    qsort(names, (size_t)k, sizeof *names, cmp_str);
    int rc = -1;
    if (index >= 0 && index < k && names[index]) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s/information", dir, names[index]);
        rc = read_field(path, "Model", out, n);
    }
    for (int i = 0; i < k; i++)
        free(names[i]);
    return rc;
}

void report_device_name(char *buf, size_t n, backend_kind_t b, const device_stats_t *d)
{
    if (d->name[0]) {
        snprintf(buf, n, "%s %d (%.64s)", b == BACKEND_CUDA ? "GPU" : "device", d->device_id,
                 d->name);
        return;
    }
    if (b == BACKEND_CUDA) {
        char model[128];
        if (gpu_name(d->device_id, model, sizeof model) == 0)
            snprintf(buf, n, "GPU %d (%s)", d->device_id, model);
        else
            snprintf(buf, n, "GPU %d", d->device_id);
        return;
    }
    const char *cpu = report_cpu_model();
    snprintf(buf, n, "CPU worker %d%s%s%s", d->device_id, cpu[0] ? " (" : "", cpu,
             cpu[0] ? ")" : "");
}

static char *trim(char *s)
{
    while (*s == ' ')
        s++;
    size_t l = strlen(s);
    while (l > 0 && s[l - 1] == ' ')
        s[--l] = 0;
    return s;
}

cJSON *report_json_env(const report_ctx_t *ctx, const run_result_t *r)
{
    (void)ctx;
    cJSON *env = cJSON_CreateObject();
    cJSON_AddStringToObject(env, "backend", backend_kind_name(r->backend));
    cJSON *devs = cJSON_AddArrayToObject(env, "devices");
    for (int i = 0; i < r->ndev; i++) {
        char name[160];
        report_device_name(name, sizeof name, r->backend, &r->dev[i]);
        cJSON_AddItemToArray(devs, cJSON_CreateString(name));
    }
    const char *cpu = report_cpu_model();
    if (cpu[0])
        cJSON_AddStringToObject(env, "cpu_model", cpu);
    else
        cJSON_AddNullToObject(env, "cpu_model");
    cJSON_AddNumberToObject(env, "cpus_online", (double)sysconf(_SC_NPROCESSORS_ONLN));
    struct utsname u;
    if (uname(&u) == 0) {
        char os[300];
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
        cJSON_AddStringToObject(env, "os", os);
    } else {
        cJSON_AddNullToObject(env, "os");
    }
    cJSON_AddStringToObject(env, "blas", backend_cpu_blas_info());

    cJSON *v = cJSON_AddObjectToObject(env, "versions");
    cJSON_AddStringToObject(v, "ddpbench", DDPBENCH_VERSION);
    char ob[64];
    snprintf(ob, sizeof ob, "%s", OPENBLAS_VERSION); /* " OpenBLAS 0.3.21 " */
    char *ver = trim(ob);
    if (strncmp(ver, "OpenBLAS ", 9) == 0)
        ver += 9;
    cJSON_AddStringToObject(v, "openblas", ver);
    cJSON_AddStringToObject(v, "cjson", cJSON_Version());
#ifdef HAVE_CUDA
    char cu[32];
    snprintf(cu, sizeof cu, "%d.%d", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
    cJSON_AddStringToObject(v, "cuda", cu);
#else
    cJSON_AddNullToObject(v, "cuda");
#endif
#ifdef HAVE_NCCL
    char nc[32];
    snprintf(nc, sizeof nc, "%d.%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    cJSON_AddStringToObject(v, "nccl", nc);
#else
    cJSON_AddNullToObject(v, "nccl");
#endif
    return env;
}
