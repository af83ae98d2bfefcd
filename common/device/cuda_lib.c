/* common/device/cuda_lib.c: loading libddpbench-cuda.so on first use, and the
 * CUDA entry points of backend.h that forward to it (see cuda_lib.h).  The
 * probe loads it only in a short-lived child: a run that finds no GPU never
 * maps the CUDA libraries, and neither does DDP's supervisor (its ranks load
 * the library themselves when they create their devices). */
#include "device/cuda_lib.h"

#if defined(HAVE_CUDA) && !defined(DDPBENCH_CUDA_LINKED)

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/status.h"
#include "device/backend.h"

#define PROBE_LIMIT_MS 90000

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void *g_lib;
static char g_why[ERR_LEN];

static void load(void)
{
    /* Found through the program's run path: beside the binary, or in
     * ../lib/ddpbench after make install.  RTLD_LOCAL: its symbols stay its
     * own (it exports only the entry points anyway). */
    g_lib = dlopen(CUDA_LIB_NAME, RTLD_NOW | RTLD_LOCAL);
    if (!g_lib) {
        const char *e = dlerror();
        snprintf(g_why, sizeof g_why, "cannot load the CUDA backend: %s",
                 e ? e : CUDA_LIB_NAME ": unknown error");
    }
}

void *cuda_lib_symbol(const char *name, char *why)
{
    /* Why once: DP workers may create CUDA backends from several threads. */
    pthread_once(&g_once, load);
    if (!g_lib) {
        err_set(why, DDP_OK, "%s", g_why);
        return NULL;
    }
    void *f = dlsym(g_lib, name);
    if (!f)
        err_set(why, DDP_OK, "cannot load the CUDA backend: %s has no %s", CUDA_LIB_NAME, name);
    return f;
}

bool backend_cuda_available(void)
{
    char why[ERR_LEN];
    bool (*f)(void) = (bool (*)(void))cuda_lib_symbol("backend_cuda_available", why);
    return f && f();
}

// ---------------------------------------------------------------------------
// the probe: asked of a child, so this process never maps the CUDA libraries
// to learn there is no GPU

typedef struct {
    int count;
    char why[ERR_LEN];
    gpu_topology_t gpus; /* what the library's probe learnt of them */
} probe_msg_t;

/* The library's own probe (which forks once more: CUDA must not be
 * initialised in the process that loaded it before it forks DDP ranks),
 * run in a child that loads the library, the answer sent back through a
 * pipe.  A library that cannot be loaded (missing, or an address-space
 * limit too small for cuBLAS) is the child's answer too. */
static int probe_in_child(char *why, gpu_topology_t *gpus)
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
        probe_msg_t m;
        memset(&m, 0, sizeof m);
        close(fds[0]);
        int (*f)(char *) = (int (*)(char *))cuda_lib_symbol("backend_cuda_probe", m.why);
        m.count = f ? f(m.why) : 0;
        const gpu_topology_t *(*g)(void) =
            (const gpu_topology_t *(*)(void))cuda_lib_symbol("backend_cuda_gpus", m.why);
        const gpu_topology_t *t = m.count > 0 && g ? g() : NULL;
        if (t)
            m.gpus = *t;
        _Static_assert(sizeof(probe_msg_t) <= PIPE_BUF, "one atomic write");
        ssize_t w = write(fds[1], &m, sizeof m); /* < PIPE_BUF: one atomic write */
        _exit(w == (ssize_t)sizeof m ? 0 : 1);
    }
    close(fds[1]);
    probe_msg_t m;
    memset(&m, 0, sizeof m);
    /* Why a limit: a wedged driver must not hang ddpbench (the library's
     * own probe gives up after a minute; this allows for loading it). */
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    int pr;
    do
        pr = poll(&pfd, 1, PROBE_LIMIT_MS);
    while (pr < 0 && errno == EINTR);
    size_t got = 0;
    while (pr > 0 && got < sizeof m) {
        ssize_t r = read(fds[0], (char *)&m + got, sizeof m - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fds[0]);
    if (got != sizeof m)
        kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ; /* ECHILD: another SIGCHLD handler reaped it; the pipe said enough */
    if (got != sizeof m)
        return err_set(why, 0, "CUDA probe: %s", pr == 0 ? "no answer in time"
                                                         : "the probe process died");
    m.why[ERR_LEN - 1] = 0;
    snprintf(why, ERR_LEN, "%s", m.why);
    for (int i = 0; i < GPU_INFO_MAX; i++) { /* strings from another process */
        m.gpus.gpu[i].name[sizeof m.gpus.gpu[i].name - 1] = 0;
        m.gpus.gpu[i].pci_bus_id[sizeof m.gpus.gpu[i].pci_bus_id - 1] = 0;
    }
    if (m.gpus.count < 0 || m.gpus.count > GPU_INFO_MAX)
        m.gpus.count = 0;
    *gpus = m.gpus;
    return m.count > 0 ? m.count : 0;
}

static pthread_mutex_t g_probe_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_probed;
static int g_count;
static char g_probe_why[ERR_LEN];
static gpu_topology_t g_gpus;

int backend_cuda_probe(char *why)
{
    char local[ERR_LEN];
    if (!why)
        why = local;
    /* Why a lock: the answer is cached for the process, and tests probe
     * from several threads. */
    pthread_mutex_lock(&g_probe_lock);
    if (!g_probed) {
        if (g_lib) { /* loaded here already: the library's probe knows what to do */
            int (*f)(char *) = (int (*)(char *))cuda_lib_symbol("backend_cuda_probe", g_probe_why);
            g_count = f ? f(g_probe_why) : 0;
            char why2[ERR_LEN];
            const gpu_topology_t *(*g)(void) =
                (const gpu_topology_t *(*)(void))cuda_lib_symbol("backend_cuda_gpus", why2);
            const gpu_topology_t *t = g_count > 0 && g ? g() : NULL;
            if (t)
                g_gpus = *t;
        } else {
            g_count = probe_in_child(g_probe_why, &g_gpus);
        }
        g_probed = true;
    }
    int n = g_count;
    snprintf(why, ERR_LEN, "%s", g_probe_why);
    pthread_mutex_unlock(&g_probe_lock);
    return n;
}

const gpu_topology_t *backend_cuda_gpus(void)
{
    char why[ERR_LEN];
    if (backend_cuda_probe(why) <= 0)
        return NULL;
    /* Written once under the lock before g_probed; constant afterwards. */
    return g_gpus.count > 0 ? &g_gpus : NULL;
}

int backend_cuda_create(backend_t **out, int device_id, char *err)
{
    *out = NULL;
    char why[ERR_LEN];
    int (*f)(backend_t **, int, char *) =
        (int (*)(backend_t **, int, char *))cuda_lib_symbol("backend_cuda_create", why);
    if (!f)
        return err_set(err, DDP_ERR_INPUT, "--backend cuda: device %d: %s", device_id, why);
    return f(out, device_id, err);
}

#else

#include <stddef.h>

#include "base/status.h"

void *cuda_lib_symbol(const char *name, char *why)
{
    (void)name;
    err_set(why, DDP_OK, "this ddpbench loads no CUDA library");
    return NULL;
}

#endif
