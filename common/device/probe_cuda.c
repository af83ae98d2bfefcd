/* common/device/probe_cuda.c: how many GPUs are visible and what they are
 * (names, PCI bus ids, memory, which pairs can reach each other's memory),
 * found without initialising CUDA in the calling process
 * (backend_cuda_probe, backend_cuda_gpus, see backend.h), and the in-process
 * count that backend_cuda_create uses.
 *
 * CUDA does not survive fork(): a process that has initialised it cannot hand
 * a working CUDA to its children, and the DDP supervisor forks its ranks after
 * resolving --backend auto.  So the probe forks a short-lived child that calls
 * cudaGetDeviceCount and writes the answer into a pipe; the parent never
 * touches CUDA.  The child also describes the GPUs and reports the versions of
 * the runtime, driver, cuBLAS and NCCL (the run's provenance).  The answer is
 * cached for the life of the process.  Once this
 * process has initialised CUDA anyway (it created a CUDA backend), a child
 * could no longer use CUDA, so the count is then asked in-process.  The
 * names come from the same runtime, so they follow CUDA's numbering (the
 * driver's /proc files list GPUs in PCI order, which CUDA does not use
 * unless CUDA_DEVICE_ORDER=PCI_BUS_ID). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#ifdef HAVE_NCCL
#include <nccl.h>
#endif

#include "device/backend.h"
#include "device/backend_cuda.h"

/* A driver that needs this long to enumerate its GPUs is broken; say so
 * rather than hang the program. */
#define PROBE_TIMEOUT_MS 60000

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_cached;
static int g_count;
static char g_why[ERR_LEN];
static gpu_topology_t g_topo;
static atomic_bool g_cuda_here; /* this process has called into CUDA */

// ---------------------------------------------------------------------------
// in-process count

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
        err_set(why, DDP_OK, "no CUDA driver (cudaErrorInsufficientDriver)");
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
// the forked probe

typedef struct {
    int count;
    char why[ERR_LEN];
    gpu_topology_t topo;
} probe_msg_t;

static int read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static int probe_forked(char *why, gpu_topology_t *topo)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return err_set(why, 0, "CUDA probe: pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return err_set(why, 0, "CUDA probe: fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* The child: count, report, and leave with _exit so nothing of the
         * parent's (stdio buffers, atexit handlers) runs twice. */
        probe_msg_t m;
        memset(&m, 0, sizeof m);
        close(fds[0]);
        m.count = cuda_count_devices(m.why);
        if (m.count > 0)
            describe(&m.topo, m.count);
        _Static_assert(sizeof(probe_msg_t) <= PIPE_BUF, "one atomic write");
        ssize_t w = write(fds[1], &m, sizeof m); /* < PIPE_BUF: one atomic write */
        _exit(w == (ssize_t)sizeof m ? 0 : 1);
    }
    close(fds[1]);

    /* Why poll with a limit: a wedged driver must not hang ddpbench. */
    probe_msg_t m;
    memset(&m, 0, sizeof m);
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    int pr;
    do
        pr = poll(&pfd, 1, PROBE_TIMEOUT_MS);
    while (pr < 0 && errno == EINTR);
    bool got = pr > 0 && read_full(fds[0], &m, sizeof m) == 0;
    close(fds[0]);
    if (!got)
        kill(pid, SIGKILL); /* timed out or broke the pipe: make sure it is gone */

    /* Reap it (no zombie).  ECHILD: someone else's SIGCHLD handler reaped it
     * first; the pipe already said what we need. */
    int st = 0;
    pid_t w;
    do
        w = waitpid(pid, &st, 0);
    while (w < 0 && errno == EINTR);

    if (got) {
        m.why[ERR_LEN - 1] = 0;
        snprintf(why, ERR_LEN, "%s", m.why);
        for (int i = 0; i < GPU_INFO_MAX; i++) { /* strings from another process */
            m.topo.gpu[i].name[sizeof m.topo.gpu[i].name - 1] = 0;
            m.topo.gpu[i].pci_bus_id[sizeof m.topo.gpu[i].pci_bus_id - 1] = 0;
        }
        *topo = m.topo;
        return m.count > 0 ? m.count : 0;
    }
    if (pr == 0)
        return err_set(why, 0, "CUDA probe: cudaGetDeviceCount did not answer in %d s",
                       PROBE_TIMEOUT_MS / 1000);
    if (w == pid && WIFSIGNALED(st))
        return err_set(why, 0, "CUDA probe: cudaGetDeviceCount crashed (signal %d)",
                       WTERMSIG(st));
    return err_set(why, 0, "CUDA probe: the probe process exited without an answer");
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
            g_count = probe_forked(g_why, &g_topo);
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
