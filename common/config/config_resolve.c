/* common/config/config_resolve.c: "auto" made facts about this machine: the backend
 * (a forked CUDA probe: the supervisor never initialises CUDA), the device list and
 * its rules; under mpirun, this rank's device and the collectives across processes. */
#include <stdio.h>
#include <unistd.h>

#include "common/device/backend.h"
#include "common/config/config.h"

/* auto: cuda when a GPU is visible, else cpu with a notice; cuda without one, an error */
static int resolve_backend(config_t *c, char *note, size_t note_len, char *err)
{
    char why[ERR_LEN] = "";
    note[0] = 0;
    if (c->backend == BACKEND_CPU)
        return DDP_OK;
    int n = backend_cuda_probe(why);
    if (c->backend == BACKEND_CUDA) {
        if (n <= 0)
            return err_set(err, DDP_ERR_INPUT, "--backend cuda: no GPU: %s", why);
        return DDP_OK;
    }
    if (n > 0) {
        c->backend = BACKEND_CUDA;
        snprintf(note, note_len, "(auto: %d GPU%s visible)", n, n == 1 ? "" : "s");
    } else {
        if (c->precision == PREC_TF32)
            return err_set(err, DDP_ERR_INPUT,
                           "--precision tf32: needs a GPU, and there is none (%s)", why);
        c->backend = BACKEND_CPU;
        snprintf(note, note_len, "(auto: no GPU, %s)", why);
    }
    return DDP_OK;
}

/* --gpus auto, and the rules on repeated ids. */
static int resolve_devices(config_t *c, char *err)
{
    if (c->ngpus == 0) {
        int n;
        if (c->mode == MODE_SINGLE) {
            n = 1;
        } else if (c->backend == BACKEND_CUDA) {
            char why[ERR_LEN];
            n = backend_cuda_probe(why);
        } else {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            n = cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus;
        }
        for (int i = 0; i < n; i++)
            c->gpus[i] = i;
        c->ngpus = n;
    }
    if (c->mode == MODE_SINGLE && c->ngpus != 1)
        return err_set(err, DDP_ERR_INPUT, "--gpus: --mode single uses one device, got %d",
                       c->ngpus);
    /* A CPU worker id is a label, but one past the most workers is a typo. */
    if (c->backend == BACKEND_CPU)
        for (int i = 0; i < c->ngpus; i++)
            if (c->gpus[i] >= MAX_DEVICES)
                return err_set(err, DDP_ERR_INPUT,
                               "--gpus: CPU worker %d does not exist: the CPU backend has "
                               "workers 0 to %d",
                               c->gpus[i], MAX_DEVICES - 1);
    /* repeated ids are replicas on one GPU; on the CPU a repeat is a mistake */
    bool dup_ok = c->backend == BACKEND_CUDA &&
                  (c->mode == MODE_DP || c->mode == MODE_COMPARE ||
                   ((c->mode == MODE_DDP || c->mode == MODE_COMM) && c->comm == COMM_SHM));
    for (int i = 0; i < c->ngpus; i++)
        for (int j = 0; j < i; j++)
            if (c->gpus[i] == c->gpus[j] && !dup_ok)
                return err_set(err, DDP_ERR_INPUT,
                               "--gpus: device %d appears twice (repeats are allowed only on "
                               "CUDA, for dp, or for ddp and comm with --comm shm)",
                               c->gpus[i]);
    return DDP_OK;
}

/* Under mpirun, one device per rank: this rank's is --gpus[local rank] (CPU with
 * --gpus auto: worker `local rank`); the others' stay -1 until the start-up check. */
static int resolve_world(config_t *c, bool cpu_auto, char *err)
{
    if (c->launcher != LAUNCHER_MPI)
        return DDP_OK;
    if ((c->mode == MODE_SINGLE || c->mode == MODE_DP) && c->world_size > 1)
        return err_set(err, DDP_ERR_INPUT,
                       "--mode %s: runs in one process; under mpirun use --mode ddp, compare or "
                       "comm (%d ranks were started)",
                       mode_name(c->mode), c->world_size);
    if (c->world_size < 1 || c->world_size > MAX_DEVICES)
        return err_set(err, DDP_ERR_INPUT, "mpirun started %d ranks: ddpbench runs 1..%d",
                       c->world_size, MAX_DEVICES);
    int mine = c->local_rank;
    if (!cpu_auto) {
        if (c->local_rank >= c->ngpus)
            return err_set(err, DDP_ERR_INPUT,
                           "--gpus: local rank %d on this host has no device: the list names %d "
                           "(one rank per device: start at most %d rank%s per host)",
                           c->local_rank, c->ngpus, c->ngpus, c->ngpus == 1 ? "" : "s");
        mine = c->gpus[c->local_rank];
    }
    for (int i = 0; i < c->world_size; i++)
        c->gpus[i] = -1;
    c->gpus[c->world_rank] = mine;
    c->ngpus = c->world_size;
    return DDP_OK;
}

/* --comm against the launcher; under mpirun auto is mpi on the CPU, NCCL on CUDA. */
static int resolve_comm(config_t *c, char *err)
{
    bool mpi = c->launcher == LAUNCHER_MPI;
    if (c->comm == COMM_MPI && !mpi)
        return err_set(err, DDP_ERR_INPUT,
                       "--comm mpi: needs ranks started by mpirun (mpirun -np N ddpbench ..., or "
                       "--launcher mpi)");
    if (c->comm == COMM_MPI && c->backend == BACKEND_CUDA)
        return err_set(err, DDP_ERR_INPUT,
                       "--comm mpi: for CPU ranks; CUDA ranks under mpirun use --comm nccl");
    if (mpi && c->comm == COMM_SHM)
        return err_set(err, DDP_ERR_INPUT,
                       "--comm shm: ranks started by mpirun share no memory segment; use --comm "
                       "mpi (CPU) or nccl (CUDA)");
    if (mpi && c->comm == COMM_AUTO)
        c->comm = c->backend == BACKEND_CUDA ? COMM_NCCL : COMM_MPI;
    return DDP_OK;
}

/* What depends on the device count: the stream's ranks, --batch-per-device's batch. */
static int resolve_stream(config_t *c, char *err)
{
    bool ddp = c->mode == MODE_DDP || c->mode == MODE_COMPARE;
    if (ddp && c->nrank_samples && c->nrank_samples != c->ngpus)
        return err_set(err, DDP_ERR_INPUT,
                       "--rank-samples: %d counts for %d ranks (one count per device of --gpus)",
                       c->nrank_samples, c->ngpus);
    if (ddp && c->sampler_replicas && c->sampler_replicas != c->ngpus && c->mode == MODE_DDP)
        return err_set(err, DDP_ERR_INPUT,
                       "--sampler-replicas: ddp's DistributedSampler has one replica per rank "
                       "(%d), got %d",
                       c->ngpus, c->sampler_replicas);
    /* compare: single and dp read ddp's stream, the same samples at every step */
    if (c->sampler_replicas == 0)
        c->sampler_replicas = c->nrank_samples ? c->nrank_samples : ddp ? c->ngpus : 1;
    if (c->batch_per_device) {
        long ranks = c->nrank_samples ? c->nrank_samples : c->mode == MODE_SINGLE ? 1 : c->ngpus;
        long b = (long)c->batch_per_device * ranks;
        if (b > 1L << 24)
            return err_set(err, DDP_ERR_INPUT,
                           "--batch-per-device: %d x %ld devices is more than %d rows",
                           c->batch_per_device, ranks, 1 << 24);
        c->batch = (int)b;
    }
    return DDP_OK;
}

bool config_dp_nccl(const config_t *c)
{
#ifdef HAVE_NCCL
    if (c->backend != BACKEND_CUDA || c->ngpus < 2)
        return false;
    for (int i = 0; i < c->ngpus; i++)
        for (int j = 0; j < i; j++)
            if (c->gpus[i] == c->gpus[j])
                return false;
    return true;
#else
    (void)c;
    return false;
#endif
}

/* What keeps a step of `mode` from being a graph, from the options alone. */
static const char *graph_step_why_not(const config_t *c, mode_t_ mode)
{
    if (c->accum > 1)
        return "--accum: a step of several micro-batches has accumulation boundaries";
    /* NCCL's guide ("Using NCCL with CUDA Graphs"): several GPUs of one
     * process in CUDA graphs may deadlock, as cudaGraphLaunch may block; a
     * launch that blocks on the host is bounded by nothing (no --timeout
     * watches it), so auto keeps that to the user's explicit on. */
    if (mode == MODE_DP && c->cuda_graph != CUDA_GRAPH_ON && config_dp_nccl(c))
        return "dp over NCCL on distinct GPUs runs eagerly: NCCL's guide warns that several GPUs "
               "of one process in CUDA graphs may deadlock (cudaGraphLaunch may block), and "
               "nothing bounds a launch that blocks; --cuda-graph on captures it";
    if (mode == MODE_DDP && c->comm == COMM_SHM)
        return "ddp over --comm shm: the host sums the gradients (each step copies them to the "
               "host and waits), which a graph cannot hold; --comm nccl is captured";
    if (mode == MODE_DDP && c->zero > 0)
        return "--zero: the shards' gathers and reduce-scatters are not captured yet";
    if (mode != MODE_SINGLE && mode != MODE_DP && mode != MODE_DDP)
        return "no training step";
    return NULL;
}

const char *config_graph_why_not(const config_t *c, mode_t_ mode)
{
    if (c->backend != BACKEND_CUDA)
        return "the CPU backend computes as it is called: nothing to capture";
    return graph_step_why_not(c, mode);
}

/* --cuda-graph on where a step cannot qualify: an input error, the first reason. */
static int resolve_graphs(const config_t *c, const char *(*why_not)(const config_t *, mode_t_),
                          char *err)
{
    if (c->cuda_graph != CUDA_GRAPH_ON)
        return DDP_OK;
    if (c->mode == MODE_COMM)
        return err_set(err, DDP_ERR_INPUT, "--cuda-graph on: --mode comm has no training step");
    static const mode_t_ all[] = {MODE_SINGLE, MODE_DP, MODE_DDP};
    for (int i = 0; i < 3; i++) {
        if (c->mode != MODE_COMPARE && c->mode != all[i])
            continue;
        const char *why = why_not(c, all[i]);
        if (why)
            return err_set(err, DDP_ERR_INPUT, "--cuda-graph on: %s%s%s",
                           c->mode == MODE_COMPARE ? mode_name(all[i]) : "",
                           c->mode == MODE_COMPARE ? ": " : "", why);
    }
    return DDP_OK;
}

int config_resolve(config_t *c, char *note, size_t note_len, char *err)
{
    note[0] = 0;
    /* the step's refusals first: the GPU probe's "no GPU" must not hide them */
    TRY(resolve_graphs(c, graph_step_why_not, err));
    TRY(resolve_backend(c, note, note_len, err));
    bool cpu_auto = c->ngpus == 0 && c->backend == BACKEND_CPU;
    TRY(resolve_devices(c, err));
    if (c->slow_rank >= c->ngpus)
        return err_set(err, DDP_ERR_INPUT, "--slow-rank: rank %d, but there are %d ranks (0..%d)",
                       c->slow_rank, c->ngpus, c->ngpus - 1);
    if (c->comm_hook == HOOK_POWERSGD && c->backend == BACKEND_CUDA)
        return err_set(err, DDP_ERR_INPUT, "--comm-hook powersgd: the CPU backend only (--backend "
                       "cpu); on CUDA use fp16 or bf16");
    TRY(resolve_world(c, cpu_auto, err));
    TRY(resolve_comm(c, err));
    TRY(resolve_stream(c, err));
    return resolve_graphs(c, config_graph_why_not, err);
}
