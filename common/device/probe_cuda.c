/* common/device/probe_cuda.c: how many GPUs are visible and what they are (backend.h's
 * backend_cuda_probe, backend_cuda_gpus), asked of a short-lived child (probe.h: CUDA does
 * not survive fork), cached for the process; once this process has initialised CUDA itself
 * the question is asked in-process.  The names come from the runtime, so they follow
 * CUDA's numbering (not the driver's PCI order unless CUDA_DEVICE_ORDER=PCI_BUS_ID). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#ifdef HAVE_NCCL
#include <nccl.h>
#endif

#include "common/device/backend.h"
#include "common/device/backend_cuda.h"
#include "common/device/probe.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_cached;
static int g_count;
static char g_why[ERR_LEN];
static gpu_topology_t g_topo;
static atomic_bool g_cuda_here; /* this process has called into CUDA */

// ---------------------------------------------------------------------------
// in-process count

/* The oldest driver branch of each CUDA release (NVIDIA's CUDA toolkit
 * release notes, table 3: "CUDA Toolkit and Minimum Required Driver
 * Version"), newest first. */
static int driver_branch(int cuda)
{
    static const int t[][2] = {{13000, 580}, {12090, 575}, {12080, 570}, {12060, 560},
                               {12050, 555}, {12040, 550}, {12030, 545}, {12020, 535},
                               {12010, 530}, {12000, 525}, {11080, 520}, {11000, 450}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (cuda >= t[i][0])
            return t[i][1];
    return 0;
}

/* cudaErrorInsufficientDriver: no driver, or one older than this runtime
 * (cudaDriverGetVersion answers the newest CUDA it runs, 0 without one). */
static void insufficient_driver(char *why)
{
    int drv = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess || drv <= 0 || drv >= CUDART_VERSION) {
        err_set(why, DDP_OK, "no CUDA driver (cudaErrorInsufficientDriver)");
        return;
    }
    /* the driver's own number when the kernel module says it, else its branch */
    char ver[32] = "";
    FILE *f = fopen("/sys/module/nvidia/version", "r");
    if (!f || fscanf(f, "%31[0-9]", ver) != 1)
        snprintf(ver, sizeof ver, "%d", driver_branch(drv));
    if (f)
        fclose(f);
    err_set(why, DDP_OK,
            "driver too old for CUDA %d (needs R%d or newer), found R%s, which runs CUDA %d.%d "
            "at most (cudaErrorInsufficientDriver)",
            CUDART_VERSION / 1000, driver_branch(CUDART_VERSION), ver, drv / 1000,
            drv % 1000 / 10);
}

int cuda_count_devices(char *why)
{
    /* Why atomic: DP workers may create backends from several threads. */
    atomic_store(&g_cuda_here, true);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaSuccess && n > 0) {
        err_set(why, DDP_OK, "%d CUDA device%s visible", n, n == 1 ? "" : "s");
        return n;
    }
    if (e == cudaSuccess || e == cudaErrorNoDevice)
        err_set(why, DDP_OK, "no CUDA device (cudaErrorNoDevice)");
    else if (e == cudaErrorInsufficientDriver)
        insufficient_driver(why);
    else if (e == cudaErrorInitializationError)
        /* The classic cause: this process was forked from one that had
         * already initialised CUDA (CUDA does not survive fork). */
        err_set(why, DDP_OK,
                "cudaGetDeviceCount failed: %s: %s (was CUDA initialised in a parent process "
                "before it forked this one?)",
                cudaGetErrorName(e), cudaGetErrorString(e));
    else
        err_set(why, DDP_OK, "cudaGetDeviceCount failed: %s: %s", cudaGetErrorName(e),
                cudaGetErrorString(e));
    cudaGetLastError(); /* the failure is reported; do not let it resurface in a later call */
    return 0;
}

/* Describe the first n visible GPUs (this process talks to CUDA). */
static void describe(gpu_topology_t *t, int n)
{
    memset(t, 0, sizeof *t);
    t->count = n < GPU_INFO_MAX ? n : GPU_INFO_MAX;
    for (int i = 0; i < t->count; i++) {
        gpu_info_t *g = &t->gpu[i];
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) == cudaSuccess) {
            snprintf(g->name, sizeof g->name, "%.95s", p.name);
            g->mem_bytes = p.totalGlobalMem;
            g->cc_major = p.major;
            g->cc_minor = p.minor;
        }
        if (cudaDeviceGetPCIBusId(g->pci_bus_id, (int)sizeof g->pci_bus_id, i) != cudaSuccess)
            g->pci_bus_id[0] = 0;
        for (int j = 0; j < t->count; j++) {
            int can = 0, rank = 0;
            t->peer[i][j] = -1;
            if (i != j && cudaDeviceCanAccessPeer(&can, i, j) == cudaSuccess && can)
                t->peer[i][j] = cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank,
                                                          i, j) == cudaSuccess
                                    ? (signed char)(rank > 100 ? 100 : rank)
                                    : 0;
        }
    }
    cudaRuntimeGetVersion(&t->runtime_version);
    cudaDriverGetVersion(&t->driver_version);
    int ma = 0, mi = 0, pa = 0;
    if (cublasGetProperty(MAJOR_VERSION, &ma) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(MINOR_VERSION, &mi) == CUBLAS_STATUS_SUCCESS &&
        cublasGetProperty(PATCH_LEVEL, &pa) == CUBLAS_STATUS_SUCCESS)
        t->cublas_version = ma * 10000 + mi * 100 + pa;
#ifdef HAVE_NCCL
    ncclGetVersion(&t->nccl_version);
#endif
    cudaGetLastError(); /* a query that failed is reported as missing, not later */
}

// ---------------------------------------------------------------------------
// the probe

/* Count and describe the GPUs in this process: the answer of a probe child
 * (probe.h), here or in cuda_lib.c's child, which has loaded this library
 * for it and calls this through the library's exports. */
void backend_cuda_probe_here(gpu_probe_msg_t *m)
{
    m->count = cuda_count_devices(m->why);
    if (m->count > 0)
        describe(&m->gpus, m->count);
}

int backend_cuda_probe(char *why)
{
    char local[ERR_LEN];
    if (!why)
        why = local;
    /* Why a lock: the cache is process-wide and tests may probe from threads. */
    pthread_mutex_lock(&g_lock);
    if (!g_cached) {
        if (atomic_load(&g_cuda_here)) {
            g_count = cuda_count_devices(g_why);
            if (g_count > 0)
                describe(&g_topo, g_count);
        } else {
            g_count = gpu_probe_in_child(backend_cuda_probe_here, GPU_PROBE_LIMIT_MS, g_why,
                                         &g_topo);
        }
        g_cached = true;
    }
    int n = g_count;
    snprintf(why, ERR_LEN, "%s", g_why);
    pthread_mutex_unlock(&g_lock);
    return n;
}

const gpu_topology_t *backend_cuda_gpus(void)
{
    char why[ERR_LEN];
    if (backend_cuda_probe(why) <= 0)
        return NULL;
    /* Written once under the lock before g_cached; constant afterwards. */
    return g_topo.count > 0 ? &g_topo : NULL;
}
