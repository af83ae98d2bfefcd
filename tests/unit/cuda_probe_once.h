/* tests/unit/cuda_probe_once.h: the GPU probe once per test binary.
 *
 * Criterion runs each test in a process of its own, and each probed for a
 * GPU: where the CUDA library is built but there is no GPU (the CI machine),
 * each probe loads cudart, cuBLAS and NCCL in a child, seconds on a busy
 * machine, for a test that then skips (test_cuda took 19 s, test_comm_nccl
 * 17 s, to skip).  The hook probes once in Criterion's runner, before any
 * test, and when it finds no GPU says why in DDPBENCH_TEST_NO_GPU, which the
 * tests' processes inherit; cuda_probe_once() answers from it, else probes.
 * The emulated GPU (DDPBENCH_CUDA_LINKED) probes in the process itself, at
 * no cost: the hook leaves it alone. */
#ifndef DDPBENCH_TEST_CUDA_PROBE_ONCE_H
#define DDPBENCH_TEST_CUDA_PROBE_ONCE_H

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/device/backend.h"

#ifndef DDPBENCH_CUDA_LINKED
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    char why[ERR_LEN] = "";
    if (backend_cuda_probe(why) <= 0)
        setenv("DDPBENCH_TEST_NO_GPU", why[0] ? why : "no GPU", 1);
}
#endif

/* backend_cuda_probe's count, or 0 (and why) when the runner found none */
static inline int cuda_probe_once(char *why)
{
    const char *no = getenv("DDPBENCH_TEST_NO_GPU");
    if (no) {
        snprintf(why, ERR_LEN, "%s", no);
        return 0;
    }
    return backend_cuda_probe(why);
}

#endif
