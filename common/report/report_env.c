/* common/report/report_env.c: the machine a run ran on, for --json's "environment":
 * device names (CPU model from /proc/cpuinfo; GPU name, PCI bus id, memory
 * and peer links from the GPU probe, which asked the CUDA runtime in a
 * forked child, so they follow CUDA's numbering and this process never
 * initialises CUDA for them), the BLAS library and the versions of the
 * libraries built in. */
#include <ctype.h>
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

void report_device_name(char *buf, size_t n, backend_kind_t b, const device_stats_t *d)
{
    if (d->name[0]) {
        snprintf(buf, n, "%s %d (%.64s)", b == BACKEND_CUDA ? "GPU" : "device", d->device_id,
                 d->name);
        return;
    }
    if (b == BACKEND_CUDA) {
        const gpu_topology_t *t = backend_cuda_gpus();
        int id = d->device_id;
        if (t && id >= 0 && id < t->count && t->gpu[id].name[0])
            snprintf(buf, n, "GPU %d (%s, %s, %.0f GiB)", id, t->gpu[id].name,
                     t->gpu[id].pci_bus_id[0] ? t->gpu[id].pci_bus_id : "no PCI id",
                     (double)t->gpu[id].mem_bytes / (1024.0 * 1024.0 * 1024.0));
        else
            snprintf(buf, n, "GPU %d", id);
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
    /* Every visible GPU (not only the run's), and which pairs can read each
     * other's memory: the links DP's copies and NCCL take. */
    const gpu_topology_t *t = r->backend == BACKEND_CUDA ? backend_cuda_gpus() : NULL;
    if (t) {
        cJSON *gpus = cJSON_AddArrayToObject(env, "gpus");
        cJSON *peers = cJSON_AddArrayToObject(env, "gpu_peers");
        for (int i = 0; i < t->count; i++) {
            const gpu_info_t *g = &t->gpu[i];
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "id", i);
            cJSON_AddStringToObject(o, "name", g->name);
            cJSON_AddStringToObject(o, "pci_bus_id", g->pci_bus_id);
            cJSON_AddNumberToObject(o, "memory_bytes", (double)g->mem_bytes);
            char cc[16];
            snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
            cJSON_AddStringToObject(o, "compute_capability", cc);
            cJSON_AddItemToArray(gpus, o);
            cJSON *row = cJSON_CreateArray();
            for (int j = 0; j < t->count; j++)
                cJSON_AddItemToArray(row, t->peer[i][j] < 0 ? cJSON_CreateNull()
                                                             : cJSON_CreateNumber(t->peer[i][j]));
            cJSON_AddItemToArray(peers, row);
        }
    } else {
        cJSON_AddNullToObject(env, "gpus");
        cJSON_AddNullToObject(env, "gpu_peers");
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
