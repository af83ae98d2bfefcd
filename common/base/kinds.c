/* common/base/kinds.c: names of the closed sets in kinds.h. */
#include "common/base/kinds.h"

#include <string.h>

static int lookup(const char *s, const char *const *names, int n)
{
    if (!s)
        return -1;
    for (int i = 0; i < n; i++)
        if (names[i] && strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

#define NAMES(fn, T, ...)                                                          \
    static const char *const fn##_names[] = {__VA_ARGS__};                       \
    enum { fn##_count = sizeof fn##_names / sizeof fn##_names[0] };              \
    int fn##_parse(const char *s) { return lookup(s, fn##_names, fn##_count); }  \
    const char *fn##_name(T v)                                                     \
    {                                                                              \
        return ((int)v >= 0 && (int)v < fn##_count) ? fn##_names[v] : "?";       \
    }

NAMES(act, act_t, "none", "relu", "tanh", "sigmoid", "gelu")
NAMES(loss, loss_t, "mse", "bce", "ce")
NAMES(optim, optim_kind_t, "sgd", "adam", "adamw")
NAMES(mode, mode_t_, "single", "dp", "ddp", "compare", "comm")
NAMES(backend_kind, backend_kind_t, "auto", "cpu", "cuda")
NAMES(comm, comm_kind_t, "auto", "shm", "nccl", "mpi")
NAMES(launcher, launcher_kind_t, "auto", "fork", "mpi")
NAMES(synth, synth_kind_t, "auto", "regression", "binary", "classes")
NAMES(cuda_graph, cuda_graph_t, "auto", "on", "off")
NAMES(precision, precision_t, "fp32", "tf32", "bf16")

const char *comm_hook_name(comm_hook_kind_t h)
{
    static const char *const names[] = {"none", "fp16", "bf16", "powersgd"};
    return (unsigned)h < sizeof names / sizeof *names ? names[h] : "?";
}
