/* app/report/report_env.c: the machine a run ran on and what built it (its
 * provenance), for --json's "environment" and the banner.  GPU facts come from
 * the GPU probe (a forked child asked the CUDA runtime: CUDA's numbering, and
 * this process never initialises CUDA for them). */
#include <openblas_config.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/base/procfile.h"
#include "common/device/backend.h"
#include "app/report/report.h"
#ifdef HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef HAVE_MPI
#include <mpi.h> /* the Open MPI version it was built with (nothing is called) */
#endif
#ifdef HAVE_NCCL
#include <nccl.h>
#endif

/* Compiled in by the Makefile (report_env.o alone); a build without it says so. */
#ifndef DDPBENCH_REVISION
#define DDPBENCH_REVISION "unknown"
#endif
#ifndef DDPBENCH_CC
#define DDPBENCH_CC "unknown"
#endif
#ifndef DDPBENCH_CFLAGS
#define DDPBENCH_CFLAGS "unknown"
#endif

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
    const char *cpu = backend_cpu_model();
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

// ---------------------------------------------------------------------------
// provenance

const char *report_revision(void) { return DDPBENCH_REVISION; }

/* When the run started: the first time anyone asked (the banner, before
 * training), so the banner and the JSON agree. */
const char *report_time_utc(void)
{
    static char buf[32];
    if (!buf[0]) {
        time_t t = time(NULL);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    return buf;
}

/* /proc/loadavg when the run started (like report_time_utc). */
static const char *start_loadavg(void)
{
    static char buf[64];
    if (!buf[0]) {
        if (!procfile_value("/proc/loadavg", "", buf, sizeof buf))
            snprintf(buf, sizeof buf, "unknown");
        /* the three averages; not the running count and the last pid */
        char *p = buf;
        for (int field = 0; *p && field < 3; field++) {
            p += strcspn(p, " ");
            if (field < 2)
                p += strspn(p, " ");
        }
        *p = 0;
    }
    return buf;
}

const char *report_loadavg1(void)
{
    static char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)strcspn(start_loadavg(), " "), start_loadavg());
    return buf;
}

void report_start(void)
{
    report_time_utc();
    start_loadavg();
}

const char *report_host(void)
{
    static char buf[256];
    if (!buf[0] && gethostname(buf, sizeof buf - 1) != 0)
        snprintf(buf, sizeof buf, "unknown");
    return buf;
}

int report_threads(const config_t *c, mode_t_ m)
{
    return c && strategy_words(m)->reference ? c->threads : 1;
}

static int blas_threads(const report_ctx_t *ctx)
{
    const config_t *c = ctx ? ctx->cfg : NULL;
    return report_threads(c, c ? c->mode : MODE_SINGLE);
}

/* "13.0" from 13000; "12.4.1" when patch is given (cuBLAS's 120401). */
static void ver(char *buf, size_t n, int v, bool patch)
{
    if (patch)
        snprintf(buf, n, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
    else
        snprintf(buf, n, "%d.%d", v / 1000, (v % 1000) / 10);
}

static void add_ver(cJSON *o, const char *k, int v, bool patch)
{
    char b[32];
    if (v <= 0) {
        cJSON_AddNullToObject(o, k);
        return;
    }
    ver(b, sizeof b, v, patch);
    cJSON_AddStringToObject(o, k, b);
}

/* The GPU probe's answer when the run used CUDA (a CPU run does not probe). */
static const gpu_topology_t *gpu_info(backend_kind_t b)
{
    return b == BACKEND_CUDA ? backend_cuda_gpus() : NULL;
}

static const char *isa_name(int bits)
{
    return bits >= 512 ? "AVX-512" : bits >= 256 ? "AVX2" : "SSE";
}

void report_provenance(FILE *f, const report_ctx_t *ctx)
{
    const config_t *c = ctx->cfg;
    int bt = blas_threads(ctx);
    fprintf(f, "  build %s, %s (%s); %s, %d BLAS thread%s per device\n", DDPBENCH_REVISION,
            DDPBENCH_CC, DDPBENCH_CFLAGS, backend_cpu_blas_info(), bt, bt == 1 ? "" : "s");
    const char *cpu = backend_cpu_model();
    fprintf(f, "  host %s, %s, %ld CPUs, started %s, load average %s\n", report_host(),
            cpu[0] ? cpu : "CPU", sysconf(_SC_NPROCESSORS_ONLN), report_time_utc(),
            start_loadavg());
    blas_core_t k = backend_cpu_blas_core();
    if (c->backend == BACKEND_CPU && k.forced && k.bits < k.cpu_bits) /* what it costs */
        fprintf(f, "  note: OPENBLAS_CORETYPE=%s in the environment: %s kernels on an %s CPU (an "
                   "FMA loop on this core: %.1f GFLOP/s at %d bits, %.1f at %d); unset it to let "
                   "OpenBLAS choose\n",
                k.forced, isa_name(k.bits), isa_name(k.cpu_bits),
                1e-9 * backend_cpu_core_peak(k.bits), k.bits, 1e-9 * backend_cpu_core_peak(0),
                k.cpu_bits);
    const gpu_topology_t *g = gpu_info(c->backend);
    if (!g)
        return;
    char a[16], b[16], cb[16], nc[16];
    ver(a, sizeof a, g->runtime_version, false);
    ver(b, sizeof b, g->driver_version, false);
    ver(cb, sizeof cb, g->cublas_version, true);
    if (g->nccl_version >= 10000)
        ver(nc, sizeof nc, g->nccl_version, true);
    else
        snprintf(nc, sizeof nc, "%s", g->nccl_version ? "old" : "none");
    fprintf(f, "  CUDA runtime %s, driver %s, cuBLAS %s, NCCL %s; ", a, b, cb, nc);
    int pairs = 0, peers = 0;
    for (int i = 0; i < g->count; i++) {
        fprintf(f, "%sGPU %d %s (%s)", i ? ", " : "", i, g->gpu[i].name, g->gpu[i].pci_bus_id);
        for (int j = 0; j < g->count; j++)
            if (i != j) {
                pairs++;
                peers += g->peer[i][j] >= 0;
            }
    }
    fprintf(f, "; peer access %s\n", pairs == 0         ? "n/a (one GPU)"
                                      : peers == pairs ? "between every pair"
                                      : peers == 0     ? "between none"
                                                       : "between some pairs (see --json)");
}

cJSON *report_json_env(const report_ctx_t *ctx, const run_result_t *r)
{
    cJSON *env = cJSON_CreateObject();
    cJSON_AddStringToObject(env, "backend", backend_kind_name(r->backend));
    cJSON *devs = cJSON_AddArrayToObject(env, "devices");
    for (int i = 0; i < r->ndev; i++) {
        char name[160];
        report_device_name(name, sizeof name, r->backend, &r->dev[i]);
        cJSON_AddItemToArray(devs, cJSON_CreateString(name));
    }
    /* every visible GPU, and which pairs can read each other's memory */
    const gpu_topology_t *t = gpu_info(r->backend);
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
    const char *cpu = backend_cpu_model();
    report_json_str(env, "cpu_model", cpu[0] ? cpu : NULL);
    cJSON_AddNumberToObject(env, "cpus_online", (double)sysconf(_SC_NPROCESSORS_ONLN));
    struct utsname u;
    char os[300];
    bool named = uname(&u) == 0;
    if (named)
        snprintf(os, sizeof os, "%s %s %s", u.sysname, u.release, u.machine);
    report_json_str(env, "os", named ? os : NULL);
    cJSON_AddStringToObject(env, "blas", backend_cpu_blas_info());
    blas_core_t k = backend_cpu_blas_core();
    cJSON *bc = cJSON_AddObjectToObject(env, "blas_core"); /* the kernels that ran, and why */
    cJSON_AddStringToObject(bc, "name", k.name);
    report_json_str(bc, "chosen_by", k.forced ? "OPENBLAS_CORETYPE" : NULL);
    cJSON_AddNumberToObject(bc, "vector_bits", k.bits);
    cJSON_AddNumberToObject(bc, "cpu_vector_bits", k.cpu_bits);
    cJSON_AddStringToObject(env, "host", report_host());
    cJSON_AddStringToObject(env, "time_utc", report_time_utc());
    cJSON_AddStringToObject(env, "loadavg", start_loadavg());
    cJSON_AddStringToObject(env, "revision", DDPBENCH_REVISION);
    cJSON_AddStringToObject(env, "compiler", DDPBENCH_CC);
    cJSON_AddStringToObject(env, "cflags", DDPBENCH_CFLAGS);
    cJSON_AddNumberToObject(env, "blas_threads", blas_threads(ctx));
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
    add_ver(v, "cuda", CUDART_VERSION, false);
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
#if defined(HAVE_MPI) && defined(OMPI_MAJOR_VERSION)
    char mp[48];
    snprintf(mp, sizeof mp, "Open MPI %d.%d.%d", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION,
             OMPI_RELEASE_VERSION);
    cJSON_AddStringToObject(v, "mpi", mp);
#else
    cJSON_AddNullToObject(v, "mpi");
#endif
    const gpu_topology_t none = {0}, *g = t ? t : &none; /* the GPU probe's */
    add_ver(v, "cuda_runtime", g->runtime_version, false);
    add_ver(v, "cuda_driver", g->driver_version, false);
    add_ver(v, "cublas", g->cublas_version, true);
    add_ver(v, "nccl_runtime", g->nccl_version >= 10000 ? g->nccl_version : 0, true);
    return env;
}
