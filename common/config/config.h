/* common/config/config.h: everything a run is configured by (config_t), the presets,
 * and the parser that fills it: the defaults, the --model preset, every option (so an
 * option overrides the preset), the checks (config.c).  It never exits: DDP_OK,
 * CONFIG_EXIT_OK (after --help or --version) or DDP_ERR_INPUT with one line in err. */
#ifndef DDPBENCH_CONFIG_H
#define DDPBENCH_CONFIG_H

/* --repeat's largest N: app/repeat/repeat.h keeps every run's summary (REPEAT_MAX). */
#define CONFIG_REPEAT_MAX 100

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/base/kinds.h"
#include "common/nn/model.h"
#include "common/nn/optim.h"

#define CONFIG_EXIT_OK (-1)
/* --coll all: every collective but reduce (bit 2 of comm.h's coll_kind_t order) */
#define CONFIG_COLLS_ALL ((1u << 0) | (1u << 1) | (1u << 3) | (1u << 4))
#define CONFIG_PATH_LEN 1024

/* A mistake PyTorch users make, planted by a scenario (app/scenario_*.c) through a
 * seam its strategy chooses at set-up, never a branch of the fenced step. */
typedef enum {
    PLANT_NONE = 0,
    PLANT_SAME_ORDER,  /* set-epoch: every epoch reads epoch 0's order (data/schedule.c) */
    PLANT_RANK_MEAN,   /* loss-scale: each micro-batch's loss the mean over its rank's rows,
                          the ranks' gradients summed (ddp/plant.c) */
    PLANT_NO_SYNC,     /* no-sync: from step `step` on, the buckets all-reduce nothing */
    PLANT_DETACH,      /* unused: from step `step` on, rank `rank`'s backward stops above
                          layer `layer` (the layers below get no gradient) */
    PLANT_EXTRA_COLL,  /* collective-at-runtime: rank `rank` all-reduces its loss at `step` */
    PLANT_BUCKET_COPY, /* bucket-view: the buckets are copies of the gradients, not views */
} plant_kind_t;
typedef struct {
    plant_kind_t kind;
    int rank, layer;
    long step;
} plant_t;
/* What a scenario's run records for its verdict (config_t.watch): the replicas' distance
 * (and it goes on), batches that repeat the epoch before's, the first gradient norm. */
enum { WATCH_REPLICAS = 1, WATCH_BATCHES = 2, WATCH_GRAD = 4 };
#define MAX_GPU_LIST MAX_DEVICES

typedef struct {
    /* what and where */
    mode_t_ mode;
    backend_kind_t backend;
    int gpus[MAX_GPU_LIST];
    int ngpus;
    int threads;               /* OpenBLAS threads for single on the CPU */
    precision_t precision;     /* --precision (--tf32 is tf32): the GEMMs' arithmetic */
    precision_t precisions[3]; /* --precision fp32,bf16: the list asked for, in order (compare: */
    int nprecisions;           /* single, dp and ddp again at each after the first); 1 or 0 else */
    cuda_graph_t cuda_graph;   /* --cuda-graph: steps replayed as CUDA graphs (config_graph_why_not) */
    char model_name[64];       /* preset used ("" for none) */

    /* the model */
    int dims[MODEL_MAX_LAYERS + 1];
    int ndims;
    act_t act;
    loss_t loss;
    optim_cfg_t optim;
    uint64_t seed;

    /* the data */
    synth_kind_t dataset;      /* synthetic kind when no --data */
    long samples;              /* synthetic rows */
    float noise;               /* synthetic regression noise (std) */
    char data_path[CONFIG_PATH_LEN];
    char targets_path[CONFIG_PATH_LEN];
    int target_cols;

    /* the loop */
    int batch;                 /* global micro-batch (after --batch-per-device) */
    int batch_per_device;      /* > 0: --batch-per-device N, the global batch is N x ranks */
    int accum;                 /* micro-batches per optimizer step */
    long epochs;
    long steps;                /* > 0: stop after this many optimizer steps */
    bool shuffle;
    bool drop_last;
    long warmup_steps;         /* excluded from throughput */
    long log_every;            /* steps between loss lines; 0: once per epoch */
    bool allow_nonfinite;      /* a NaN/Inf loss or parameter is not a failure */

    /* the sample stream (data/schedule.h) */
    int sampler_replicas;      /* the stream every mode reads (0 until config_resolve) */
    long rank_samples[MAX_DEVICES]; /* --rank-samples: each rank's own sample count */
    int nrank_samples;         /* 0: the DistributedSampler's even split */
    bool join;                 /* --join (the default) / --no-join, under --rank-samples */

    /* DDP */
    comm_kind_t comm;
    /* who starts DDP's ranks (ddp/launch.h); under mpirun, MPI's world */
    launcher_kind_t launcher;
    int world_rank, world_size, local_rank;
    double bucket_mb;
    double first_bucket_mb;
    bool overlap;
    double timeout_s;
    int zero;                  /* --zero N: this ddp run's ZeRO stage (0: plain DDP) */
    int zero_stages[3];        /* --zero 1,2,3: the stages asked for, in order (compare: a */
    int nzero_stages;          /* ddp column each, beside plain DDP's) */
    comm_hook_kind_t comm_hook; /* --comm-hook: what each bucket's all-reduce sends */
    int powersgd_rank;         /* --comm-hook powersgd:RANK[:START]: the rank of P and Q ... */
    long powersgd_start;       /* ... and the steps all-reduced plainly before compressing */
    int slow_rank;             /* --slow-rank R:F: this rank (-1: none) ... */
    double slow_factor;        /* ... computes F times each step's forward and backward */
    int check_replicas;        /* --check-replicas N: every N steps (0: off) */

    /* --mode comm: the collective benchmark (nccl-tests' -b -e -f -n -w) */
    long min_bytes, max_bytes;
    double step_factor;
    long iters, warmup_iters;
    unsigned colls;            /* bit k: collective k of comm.h's coll_kind_t */
    bool coll_quickest;        /* not an option: each op timed alone, the quickest kept */
    int repeat;                /* --repeat: independent runs, 1..CONFIG_REPEAT_MAX */
    bool predict;              /* --predict: the alpha-beta model's table */
    bool bucket_auto;          /* --bucket-mb auto: tuned during the warm-up steps */

    /* reporting */
    bool quiet;
    bool loss_lines_off;       /* not an option: compare's runs print no per-epoch loss */
    bool desched;              /* not an option: the run-queue wait read at every lap */
    plant_t plant;             /* not options: a scenario's planted mistake ... */
    unsigned watch;            /* ... and what its runs record (WATCH_*) */
    bool json;
    bool csv;
    bool explain;
    char trace_path[CONFIG_PATH_LEN];
    char report_path[CONFIG_PATH_LEN]; /* --report FILE.html: the page (report_html.c) */

    /* checkpoints */
    char save_path[CONFIG_PATH_LEN];
    char init_path[CONFIG_PATH_LEN];
    char checkpoint_path[CONFIG_PATH_LEN];
    long checkpoint_every;
    char resume_path[CONFIG_PATH_LEN];
} config_t;

/* What a run with no options uses: every option's default, then this preset. */
#define CONFIG_DEFAULT_PRESET "mlp-small"
/* --bucket-mb's default (PyTorch DDP's bucket_cap_mb), MiB */
#define CONFIG_BUCKET_MB 25
/* --comm-hook powersgd's plain steps first (PyTorch's 1000: more than a benchmark's) */
#define CONFIG_POWERSGD_START 10
void config_defaults(config_t *c);
/* --comm-hook as given: "none", "fp16", "bf16", "powersgd:RANK:START". */
void config_comm_hook_text(const config_t *c, char *buf, size_t n);
/* The same with another preset; DDP_ERR_INPUT for an unknown name. */
int config_defaults_for(config_t *c, const char *preset, char *err);
/* Apply a named preset over c; DDP_ERR_INPUT for an unknown name. */
int config_apply_preset(config_t *c, const char *name, char *err);
/* --help's section on the presets and what each sets. */
void config_presets_usage(FILE *f);
/* The whole parse of a run's options alone (config_line_parse with this table only). */
int config_parse(config_t *c, int argc, char **argv, FILE *out, char *err);
/* Cross-field checks (also run by config_parse). */
int config_validate(const config_t *c, char *err);

/* Resolve auto and what depends on the device count; note: what auto chose (or ""). */
int config_resolve(config_t *c, char *note, size_t note_len, char *err);

/* Why --mode mode's step does not qualify for CUDA graphs here, or NULL. */
const char *config_graph_why_not(const config_t *c, mode_t_ mode);
/* Whether dp's replicate and reduce are NCCL collectives (several distinct GPUs). */
bool config_dp_nccl(const config_t *c);
/* Whether mode's steps are replayed as CUDA graphs in this run. */
static inline bool config_graphs_on(const config_t *c, mode_t_ mode)
{
    return c->cuda_graph != CUDA_GRAPH_OFF && !config_graph_why_not(c, mode);
}

/* The ranks the sample stream is dealt to: --rank-samples' count, else the replicas. */
int config_stream_ranks(const config_t *c);

/* Helpers for the rest of the program. */
int config_model_spec(const config_t *c, model_spec_t *spec, char *err);
/* Comma list "0,1,2" -> ids; duplicates allowed only when allow_dup. */
int config_parse_int_list(const char *s, int *out, int max, int *n, const char *opt,
                          bool allow_dup, char *err);

#define DDPBENCH_VERSION "0.1.0"

#endif
