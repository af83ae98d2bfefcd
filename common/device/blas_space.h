/* common/device/blas_space.h: room in the address space for OpenBLAS's
 * buffers, for the CPU backend (backend_cpu.c) alone.
 *
 * OpenBLAS (0.3.21, Debian 12) keeps a GEMM buffer for each thread that
 * computes at once (slots it maps on first use and keeps for reuse) and one
 * for each of its pool threads, mapped when the thread starts.  A buffer is
 * BUFFER_SIZE bytes (32 << 22 = 128 MiB in Debian's build: its malloc asks
 * for 134221824 bytes).  When the address space has no room for it (ulimit
 * -v), blas_memory_alloc retries forever at 100% CPU and prints nothing
 * (driver/others/memory.c: do { ... } while (map_address == -1); OpenBLAS
 * issue #5289, fixed in 0.3.30 by giving up).
 *
 * So, under a finite RLIMIT_AS only, a CPU device reserves the room its
 * buffers will need when it is created: a slot when more devices are alive
 * than slots were mapped so far, and a buffer for each pool thread its
 * thread count adds.  The pool's room is handed over as the pool grows (and
 * a GEMM that runs on every pool thread waits until they have mapped their
 * buffers); the slot's just before the device's first GEMM.  A run that
 * lacks the room fails at the device's creation, naming the limit and what
 * it leaves. */
#ifndef DDPBENCH_BLAS_SPACE_H
#define DDPBENCH_BLAS_SPACE_H

#include <stdbool.h>
#include <stddef.h>

#define BLAS_BUFFER_BYTES (((size_t)128 << 20) + ((size_t)1 << 20))

typedef struct {
    char *addr;       /* the reservation: the slot's, then the pool's */
    size_t slot_bytes, pool_bytes;
    int pool_threads; /* pool threads this device's thread count adds */
    bool counted;     /* in the count of live devices */
} blas_space_t;

/* A device that will compute with `threads` OpenBLAS threads is being
 * created: reserve what it needs (DDP_ERR_RUNTIME naming device_id, the
 * limit and the room left when there is not enough). */
int blas_space_reserve(blas_space_t *s, int threads, int device_id, char *err);
/* Grow OpenBLAS's pool to `threads` with the room reserved for it. */
void blas_space_set_threads(blas_space_t *s, int threads);
/* The device's first GEMM is about to run: its slot's room goes to OpenBLAS. */
void blas_space_first_gemm(blas_space_t *s);
/* The device is gone. */
void blas_space_free(blas_space_t *s);

/* OpenBLAS's pool and its thread count.  Its library constructor starts a
 * pool thread per core but one, before main; an idle pool thread calls
 * sched_yield in a loop for THREAD_TIMEOUT (2^28 cycles, about 0.1 s) before
 * it sleeps, and a forked child that runs a GEMM while the count is above 1
 * starts the pool again (exec_blas's re-init after fork).  Measured over a
 * 20,000-step seed-size DDP run: 20,000 sched_yield calls, one a step, and a
 * core taken from the ranks while they start.  _pool_stop sets the count to
 * 1 and stops the pool (what OpenBLAS's own fork handler does,
 * blas_thread_shutdown_, a no-op where the library has no such pool: an
 * OpenMP build), before any device exists; _threads sets the count
 * (openblas_set_num_threads, which starts the pool again) when it changes. */
void blas_space_pool_stop(void);
void blas_space_threads(int threads);

#endif
