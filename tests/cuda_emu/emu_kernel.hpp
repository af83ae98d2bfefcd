// tests/cuda_emu/emu_kernel.hpp: CUDA kernels run on the CPU, for testing the
// kernel code where there is no GPU (see run.sh).
//
// run.sh rewrites each launch "k<<<grid, block, shmem, stream>>>(args);" into
// "emu_launch(grid, block, shmem, stream, [=]() { k(args); });", which queues
// the kernel on its stream (emu_runtime.c): it runs later, on the stream's
// own host thread, like a kernel on a GPU.  Blocks run one after another;
// the threads of a block are coroutines (see struct fiber), so
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
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

#include "cuda_runtime_api.h"

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) float4 { // CUDA's 128-bit vector type (vector_types.h)
    float x, y, z, w;
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

// A saved switch point, __builtin_setjmp's buffer; jump() resumes it (GCC
// forbids __builtin_longjmp in the function that called __builtin_setjmp).
// The switching functions are not instrumented: ASan would precede each
// jump with its no-return hook, a system call (sigaltstack) per switch.
typedef void *jbuf[5];
#define EMU_SWITCH __attribute__((no_sanitize_address))
EMU_SWITCH static __attribute__((noinline)) void jump(jbuf to) { __builtin_longjmp(to, 1); }

// A GPU thread of the block: a coroutine with its own stack that outlives the
// block, so the next block (and the next kernel) resumes it instead of
// building a new context.  Switches are GCC's __builtin_setjmp/longjmp
// (three words saved, no library call), which unlike swapcontext make no
// system call (swapcontext saves the signal mask), so a kernel with barriers
// emulates in milliseconds, not seconds; nor does ASan intercept them (its
// longjmp makes a system call per jump).  ASan hears of each switch through
// its fiber calls instead (ASAN_* below).
struct fiber {
    ucontext_t uc;
    jbuf env;
    char *stack;
    void *fake; // ASan's fake stack of this fiber while it is switched out
    int state;
    bool started;
};
struct fiber_pool { // this host thread's fibers, freed with it (they never return)
    std::vector<fiber *> v;
    ~fiber_pool()
    {
        for (fiber *f : v) {
            free(f->stack);
            delete f;
        }
    }
};
static thread_local fiber_pool fibers;
static thread_local jbuf sched_env;
static thread_local int cur;
static thread_local bool saw_barrier;

// ASan keeps one stack's bounds per thread: it must hear of each jump
// between the scheduler's stack and a fiber's (start before the jump, finish
// on arrival), or it takes a fiber's frames for a stack overflow or poisons
// the wrong memory.  The scheduler's bounds are learnt at a fiber's arrival.
#if defined(__SANITIZE_ADDRESS__)
static thread_local const void *sched_bottom;
static thread_local size_t sched_size;
static thread_local void *sched_fake;
#define ASAN_TO_FIBER(f) __sanitizer_start_switch_fiber(&sched_fake, (f)->stack, STACK)
#define ASAN_IN_FIBER(f) __sanitizer_finish_switch_fiber((f)->fake, &sched_bottom, &sched_size)
#define ASAN_TO_SCHED(f) __sanitizer_start_switch_fiber(&(f)->fake, sched_bottom, sched_size)
#define ASAN_IN_SCHED() __sanitizer_finish_switch_fiber(sched_fake, nullptr, nullptr)
#else
#define ASAN_TO_FIBER(f) ((void)(f))
#define ASAN_IN_FIBER(f) ((void)(f))
#define ASAN_TO_SCHED(f) ((void)(f))
#define ASAN_IN_SCHED() ((void)0)
#endif

// Back to the scheduler (from a fiber), to be resumed where this was called.
EMU_SWITCH static void yield()
{
    fiber *f = fibers.v[cur];
    if (!__builtin_setjmp(f->env)) {
        ASAN_TO_SCHED(f);
        jump(sched_env);
    }
    ASAN_IN_FIBER(fibers.v[cur]);
}

static void fiber_main()
{
    ASAN_IN_FIBER(fibers.v[cur]);
    for (;;) { // one block per turn, as long as the host thread lives
        (*body)();
        fibers.v[cur]->state = DONE;
        yield();
    }
}

static void set_thread(int t)
{
    cur = t;
    threadIdx.x = t % blockDim.x;
    threadIdx.y = (t / blockDim.x) % blockDim.y;
    threadIdx.z = t / (blockDim.x * blockDim.y);
}

// Run thread t until it reaches a barrier or ends the block.
EMU_SWITCH static void resume(int t)
{
    set_thread(t);
    fiber *f = fibers.v[t];
    if (__builtin_setjmp(sched_env)) {
        ASAN_IN_SCHED();
        return; // it yielded
    }
    ASAN_TO_FIBER(f);
    if (f->started)
        jump(f->env);
    // First run: enter its stack once through a context; from then on it
    // jumps back to sched_env, and is resumed through its env.
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = STACK;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, fiber_main, 0);
    f->started = true;
    setcontext(&f->uc);
}

static void run_block(int nt)
{
    while ((int)fibers.v.size() < nt) {
        fiber *f = new fiber();
        f->stack = static_cast<char *>(malloc(STACK));
        fibers.v.push_back(f);
    }
    for (int t = 0; t < nt; t++)
        fibers.v[t]->state = RUNNABLE;
    saw_barrier = false;
    resume(0);
    if (fibers.v[0]->state == DONE && !saw_barrier) { // no barrier: plain calls
        for (int u = 1; u < nt; u++) {
            set_thread(u);
            (*body)();
        }
        return;
    }
    for (;;) {
        bool ran = false, all_done = true;
        for (int t = 0; t < nt; t++)
            if (fibers.v[t]->state == RUNNABLE) {
                resume(t);
                ran = true;
            }
        for (int t = 0; t < nt; t++)
            all_done = all_done && fibers.v[t]->state == DONE;
        if (all_done)
            return;
        if (!ran) {
            emu_die("every thread of a block is stuck at __syncthreads");
        }
        for (int t = 0; t < nt; t++) // everyone arrived: open the barrier
            if (fibers.v[t]->state == AT_BARRIER)
                fibers.v[t]->state = RUNNABLE;
    }
}
} // namespace emu

static inline void __syncthreads()
{
    emu::saw_barrier = true;
    emu::fibers.v[emu::cur]->state = emu::AT_BARRIER;
    emu::yield();
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
        emu_die("invalid launch: grid (%u,%u,%u) block (%u,%u,%u)", g.x, g.y, g.z, b.x, b.y,
                b.z);
    }
    emu_count_kernel();
    emu_enqueue(s, emu::run_launch, new emu::launch{g, b, std::function<void()>(f)},
                emu::free_launch);
}
