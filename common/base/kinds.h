/* common/base/kinds.h: the small closed sets the core is built from (activations,
 * losses, optimizers, modes, backends) and their user-facing names. */
#ifndef DDPBENCH_KINDS_H
#define DDPBENCH_KINDS_H

/* Devices (ranks, DP replicas) one run may use: the size of every per-device table. */
#define MAX_DEVICES 64

/* --timeout's default, seconds: the bound on any wait for another rank (a
 * comm made with timeout_s 0 takes it too). */
#define DEFAULT_TIMEOUT_S 60

typedef enum { ACT_NONE = 0, ACT_RELU, ACT_TANH, ACT_SIGMOID, ACT_GELU } act_t;
typedef enum { LOSS_MSE = 0, LOSS_BCE, LOSS_CE } loss_t;
typedef enum { OPTIM_SGD = 0, OPTIM_ADAM, OPTIM_ADAMW } optim_kind_t;
typedef enum { MODE_SINGLE = 0, MODE_DP, MODE_DDP, MODE_COMPARE, MODE_COMM } mode_t_;
typedef enum { BACKEND_AUTO = 0, BACKEND_CPU, BACKEND_CUDA } backend_kind_t;
/* COMM_LOCAL: DP's in-process group (comm.h), made by DP, never a --comm choice. */
typedef enum { COMM_AUTO = 0, COMM_SHM, COMM_NCCL, COMM_MPI, COMM_LOCAL } comm_kind_t;
/* Who starts DDP's ranks: this process by fork, or mpirun (one process each). */
typedef enum { LAUNCHER_AUTO = 0, LAUNCHER_FORK, LAUNCHER_MPI } launcher_kind_t;
/* --cuda-graph: each step after the first captured and replayed as one graph. */
typedef enum { CUDA_GRAPH_AUTO = 0, CUDA_GRAPH_ON, CUDA_GRAPH_OFF } cuda_graph_t;
/* --precision: the GEMMs' arithmetic.  fp32 is exact fp32; tf32 lets CUDA's
 * tensor cores round the GEMM inputs to 10 mantissa bits; bf16 is PyTorch
 * autocast's mixed precision (backend.h says which tensors are bf16). */
typedef enum { PREC_FP32 = 0, PREC_TF32, PREC_BF16 } precision_t;
/* DDP's communication hook (--comm-hook): what each bucket's all-reduce sends. */
typedef enum { HOOK_NONE = 0, HOOK_FP16, HOOK_BF16, HOOK_POWERSGD } comm_hook_kind_t;
typedef enum { SYNTH_AUTO = 0, SYNTH_REGRESSION, SYNTH_BINARY, SYNTH_CLASSES } synth_kind_t;

/* name -> value; return -1 for an unknown name. */
int act_parse(const char *s);
int loss_parse(const char *s);
int optim_parse(const char *s);
int mode_parse(const char *s);
int backend_kind_parse(const char *s);
int comm_parse(const char *s);
int launcher_parse(const char *s);
int synth_parse(const char *s);
int cuda_graph_parse(const char *s);
int precision_parse(const char *s);

const char *act_name(act_t a);
const char *loss_name(loss_t l);
const char *optim_name(optim_kind_t o);
const char *mode_name(mode_t_ m);
const char *backend_kind_name(backend_kind_t b);
const char *comm_name(comm_kind_t c);
const char *launcher_name(launcher_kind_t l);
const char *synth_name(synth_kind_t s);
const char *cuda_graph_name(cuda_graph_t g);
const char *precision_name(precision_t p);
const char *comm_hook_name(comm_hook_kind_t h); /* "none", "fp16", "bf16", "powersgd" */

#endif
