/* app/predict/profile.h: the boxes and workloads --hardware models, each read from a JSON
 * file or by the name of one shipped in app/predict/hardware/ and workload/ (compiled in).
 * The keys and their meaning: app/predict/README.md.  A bad profile is one line naming the
 * file and the key ("gpu.count: 0 is out of range ..."), DDP_ERR_INPUT. */
#ifndef DDPBENCH_PROFILE_H
#define DDPBENCH_PROFILE_H

#include <stdbool.h>

#include <cJSON.h>

#include "common/config/config.h"

enum { PROF_FP32, PROF_TF32, PROF_FP16, PROF_BF16, PROF_DTYPES };
enum { PROF_OPT_SGD, PROF_OPT_MOMENTUM, PROF_OPT_ADAM };

/* PyTorch's host cost of one dispatched operator, a workload's default op_s
 * (bench/torch_dispatch.py; app/predict/README.md, "The constants") */
#define PROF_OP_S 2.12e-6

#define PROF_NAME_LEN 64
#define PROF_TEXT_LEN 512

typedef struct {
    char name[PROF_NAME_LEN], gpu[PROF_NAME_LEN], link_kind[PROF_NAME_LEN];
    char source[PROF_TEXT_LEN];
    char from[CONFIG_PATH_LEN + 32];  /* "--hardware: shipped profile NAME" or the file */
    int count;
    double flops[PROF_DTYPES];        /* peak FLOP/s by dtype; 0: the GPU has none */
    double mem_bw, memory, efficiency;
    bool p2p;
    double link_bw, link_latency, gpu_bw, pcie_bw;
    double allreduce_bw;              /* a ring all-reduce's bus bandwidth; 0: from the link */
} hw_profile_t;

typedef struct {
    char name[PROF_NAME_LEN], source[PROF_TEXT_LEN];
    double params, flops_per_sample, in_bytes, out_bytes, ops, late_params;
    double load_rate;                 /* one loader worker's samples/s; 0: not modelled */
    double op_s;                      /* the framework's host cost of one operator */
    int dtype, optimizer, batch_per_device, global_batch; /* global_batch 0: per device */
    int load_workers;                 /* loader workers per process */
    bool loss_inside;
} workload_t;

/* A JSON file of app/predict/ compiled in: kind is its folder ("hardware",
 * "workload"; "predict" for published_cases), name its name less ".json".
 * The Makefile writes the table, ended by a row of NULLs. */
typedef struct {
    const char *kind, *name, *text;
} predict_file_t;
extern const predict_file_t predict_files[];

/* NAME (shipped) or FILE; the messages name the option (--hardware,
 * --workload). */
int profile_hardware(const char *name_or_file, hw_profile_t *hw, char *err);
int profile_workload(const char *name_or_file, workload_t *wl, char *err);
/* The same from a parsed object (from: what the messages call it). */
int profile_hardware_json(const cJSON *o, const char *from, hw_profile_t *hw, char *err);
int profile_workload_json(const cJSON *o, const char *from, workload_t *wl, char *err);
/* ddpbench's own MLP as a workload: its widths, the global batch and
 * precision of the run's config (single's batch is the global one, DP and
 * DDP split it). */
void profile_workload_mlp(const config_t *c, workload_t *wl);
/* The text of compiled-in kind/name.json, or NULL. */
const char *profile_shipped(const char *kind, const char *name);
/* "fp32", "tf32", "fp16", "bf16" by PROF_FP32... */
extern const char *const profile_dtypes[PROF_DTYPES + 1];

#endif
