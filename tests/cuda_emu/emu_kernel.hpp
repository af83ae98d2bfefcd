// tests/cuda_emu/emu_kernel.hpp: CUDA kernels run on the CPU, for testing the
// kernel code where there is no GPU (see run.sh).
//
// run.sh rewrites each launch "k<<<grid, block, shmem, stream>>>(args);" into
// "emu_launch(grid, block, shmem, stream, [=]() { k(args); });", which queues
// the kernel on its stream (emu_runtime.c): it runs later, on the stream's
// own host thread, like a kernel on a GPU.  Blocks run one after another;
// the threads of a block are coroutines (ucontext), so
// __syncthreads() is a real barrier: a thread that reaches it yields until
// every thread of its block has.  A kernel whose thread 0 finishes without a
// barrier has none (the project's kernels are uniform), and its other threads
// then run as plain calls, which keeps the emulation fast.  __shared__
// variables become thread_local function statics: shared by the threads of
// the one block that runs at a time on this host thread.  Everything is per
// host thread, so several streams may run kernels at once.
#pragma once
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <math.h>
#include <ucontext.h>
#include <vector>

#include "cuda_runtime_api.h"

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct emu_uint3 {
    unsigned x, y, z;
};
static thread_local emu_uint3 threadIdx, blockIdx;
static thread_local dim3 blockDim, gridDim;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static thread_local

namespace emu {
enum { RUNNABLE = 0, AT_BARRIER = 1, DONE = 2 };
static const size_t STACK = 1 << 16;
static thread_local std::function<void()> *body;
static thread_local ucontext_t sched;
static thread_local std::vector<ucontext_t> ctx;
struct stack_pool { /* coroutine stacks, kept between launches, freed with the thread */
    std::vector<char *> v;
    ~stack_pool()
    {
        for (char *p : v)
            free(p);
    }
};
static thread_local stack_pool stacks;
static thread_local std::vector<int> state;
static thread_local int cur;
static thread_local bool saw_barrier;

static void trampoline()
{
    (*body)();
    state[cur] = DONE;
    swapcontext(&ctx[cur], &sched);
}

static void set_thread(int t)
{
    cur = t;
    threadIdx.x = t % blockDim.x;
    threadIdx.y = (t / blockDim.x) % blockDim.y;
    threadIdx.z = t / (blockDim.x * blockDim.y);
}

static void run_block(int nt)
{
    if ((int)ctx.size() < nt)
        ctx.resize(nt);
    while ((int)stacks.v.size() < nt)
        stacks.v.push_back(static_cast<char *>(malloc(STACK)));
    state.assign(nt, RUNNABLE);
    saw_barrier = false;
    for (int t = 0; t < nt; t++) {
        getcontext(&ctx[t]);
        ctx[t].uc_stack.ss_sp = stacks.v[t];
        ctx[t].uc_stack.ss_size = STACK;
        ctx[t].uc_link = nullptr;
        makecontext(&ctx[t], trampoline, 0);
        if (t == 0) {
            set_thread(0);
            swapcontext(&sched, &ctx[0]);
            if (state[0] == DONE && !saw_barrier) { /* no barrier: plain calls */
                for (int u = 1; u < nt; u++) {
                    set_thread(u);
                    (*body)();
                }
                return;
            }
        }
    }
    for (;;) {
        bool ran = false, all_done = true;
        for (int t = 0; t < nt; t++)
            if (state[t] == RUNNABLE) {
                set_thread(t);
                swapcontext(&sched, &ctx[t]);
                ran = true;
            }
        for (int t = 0; t < nt; t++)
            all_done = all_done && state[t] == DONE;
        if (all_done)
            return;
        if (!ran) {
            fprintf(stderr, "cuda_emu: every thread of a block is stuck at __syncthreads\n");
            abort();
        }
        for (int t = 0; t < nt; t++) /* everyone arrived: open the barrier */
            if (state[t] == AT_BARRIER)
                state[t] = RUNNABLE;
    }
}
} // namespace emu

static inline void __syncthreads()
{
    emu::saw_barrier = true;
    emu::state[emu::cur] = emu::AT_BARRIER;
    swapcontext(&emu::ctx[emu::cur], &emu::sched);
}

namespace emu {
struct launch {
    dim3 g, b;
    std::function<void()> fn;
};

// On the stream's thread: every block of the grid, in order.
static void run_launch(void *arg)
{
    launch *l = static_cast<launch *>(arg);
    body = &l->fn;
    gridDim = l->g;
    blockDim = l->b;
    for (unsigned z = 0; z < l->g.z; z++)
        for (unsigned y = 0; y < l->g.y; y++)
            for (unsigned x = 0; x < l->g.x; x++) {
                blockIdx.x = x;
                blockIdx.y = y;
                blockIdx.z = z;
                run_block((int)(l->b.x * l->b.y * l->b.z));
            }
}

static void free_launch(void *arg) { delete static_cast<launch *>(arg); }
} // namespace emu

template <typename F>
static void emu_launch(dim3 g, dim3 b, size_t shmem, cudaStream_t s, F f)
{
    (void)shmem;
    emu_check_stream(s, "kernel launch");
    if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.x * b.y * b.z > 1024 || g.y > 65535 ||
        g.z > 65535) {
        fprintf(stderr, "cuda_emu: invalid launch: grid (%u,%u,%u) block (%u,%u,%u)\n", g.x, g.y,
                g.z, b.x, b.y, b.z);
        abort();
    }
    emu_enqueue(s, emu::run_launch, new emu::launch{g, b, std::function<void()>(f)},
                emu::free_launch);
}
