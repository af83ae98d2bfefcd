/* common/device/cuda_lib.c: loading libddpbench-cuda.so on first use, and the
 * CUDA entry points of backend.h that forward to it (see cuda_lib.h).  The
 * probe loads it only in a short-lived child: a run that finds no GPU never
 * maps the CUDA libraries, and neither does DDP's supervisor (its ranks load
 * the library themselves when they create their devices). */
#include "common/device/cuda_lib.h"

#if defined(HAVE_CUDA) && !defined(DDPBENCH_CUDA_LINKED)

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/base/status.h"
#include "common/device/backend.h"
#include "common/device/probe.h"

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void *g_lib;
static atomic_bool g_loaded; /* g_lib is set (read outside the once) */
static char g_why[ERR_LEN];

static void load(void)
{
    /* Found through the program's run path: beside the binary, or in
     * ../lib/ddpbench after make install.  RTLD_LOCAL: its symbols stay its
     * own (it exports only the entry points anyway). */
    g_lib = dlopen(CUDA_LIB_NAME, RTLD_NOW | RTLD_LOCAL);
    atomic_store(&g_loaded, g_lib != NULL);
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

/* The child's answer: load the library there and let it count and describe
 * the GPUs in that process (the child forks nothing, so it may initialise
 * CUDA).  A library that cannot be loaded (missing, or an address-space limit
 * too small for cuBLAS) is the answer too. */
static void answer_in_child(gpu_probe_msg_t *m)
{
    void (*f)(gpu_probe_msg_t *) =
        (void (*)(gpu_probe_msg_t *))cuda_lib_symbol("backend_cuda_probe_here", m->why);
    if (f)
        f(m);
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
        if (atomic_load(&g_loaded)) { /* loaded here already: the library's probe decides */
            int (*f)(char *) = (int (*)(char *))cuda_lib_symbol("backend_cuda_probe", g_probe_why);
            g_count = f ? f(g_probe_why) : 0;
            char why2[ERR_LEN];
            const gpu_topology_t *(*g)(void) =
                (const gpu_topology_t *(*)(void))cuda_lib_symbol("backend_cuda_gpus", why2);
            const gpu_topology_t *t = g_count > 0 && g ? g() : NULL;
            if (t)
                g_gpus = *t;
        } else {
            /* the library's load and cuBLAS's start count against the limit */
            g_count = gpu_probe_in_child(answer_in_child, GPU_PROBE_LIMIT_MS + 30000, g_probe_why,
                                         &g_gpus);
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

#include "common/base/status.h"

void *cuda_lib_symbol(const char *name, char *why)
{
    (void)name;
    err_set(why, DDP_OK, "this ddpbench loads no CUDA library");
    return NULL;
}

#endif
