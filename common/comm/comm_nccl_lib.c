/* common/comm/comm_nccl_lib.c: comm_nccl_create and comm_nccl_group_create forwarded to the
 * CUDA library's comm_nccl.c, loaded on first use (device/cuda_lib.h), so nothing of NCCL is
 * loaded before a run asks for it.  Apart, so the library never links this file. */
#include "common/comm/comm_impl.h"

#if defined(HAVE_NCCL) && !defined(DDPBENCH_CUDA_LINKED)

#include "common/device/cuda_lib.h"

int comm_nccl_create(comm_t **out, const comm_args_t *a, char *err)
{
    *out = NULL;
    char why[ERR_LEN];
    int (*f)(comm_t **, const comm_args_t *, char *) =
        (int (*)(comm_t **, const comm_args_t *, char *))cuda_lib_symbol("comm_nccl_create", why);
    if (!f)
        return err_set(err, DDP_ERR_INPUT, "--comm nccl: %s", why);
    return f(out, a, err);
}

int comm_nccl_group_create(comm_t **comms, backend_t *const *bes, int n, double timeout_s,
                           char *err)
{
    for (int i = 0; i < n; i++)
        comms[i] = NULL;
    char why[ERR_LEN];
    int (*f)(comm_t **, backend_t *const *, int, double, char *) =
        (int (*)(comm_t **, backend_t *const *, int, double, char *))cuda_lib_symbol(
            "comm_nccl_group_create", why);
    if (!f)
        return err_set(err, DDP_ERR_INPUT, "DP's NCCL group: %s", why);
    return f(comms, bes, n, timeout_s, err);
}

#endif
