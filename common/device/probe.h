/* common/device/probe.h: asking a short-lived child process about the GPUs,
 * for the device floor's two probes (probe_cuda.c, which calls CUDA in the
 * child, and cuda_lib.c, which first loads the CUDA library there).
 *
 * CUDA does not survive fork(): a process that has initialised it cannot
 * hand a working CUDA to its children, and DDP's supervisor forks its ranks
 * after resolving --backend auto.  So the question goes to a child, which
 * answers through a pipe and exits; the caller never touches CUDA. */
#ifndef DDPBENCH_PROBE_H
#define DDPBENCH_PROBE_H

#include "common/base/status.h"
#include "common/device/backend.h"

/* What a probe answers: the GPU count (0: none, with why) and their
 * description.  One write into a pipe (smaller than PIPE_BUF). */
typedef struct gpu_probe_msg {
    int count;
    char why[ERR_LEN];
    gpu_topology_t gpus;
} gpu_probe_msg_t;

/* A driver that needs this long to enumerate its GPUs is broken; say so
 * rather than hang the program. */
#define GPU_PROBE_LIMIT_MS 60000

/* Run answer(m) in a forked child and return its count, with its why and its
 * GPUs (strings made safe) in the caller's; a child that does not answer
 * within limit_ms is killed and named in why.  The child is always reaped. */
int gpu_probe_in_child(void (*answer)(gpu_probe_msg_t *m), int limit_ms, char *why,
                       gpu_topology_t *gpus);

#endif
