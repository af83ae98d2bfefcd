/* common/device/blas_space.h: room in the address space for OpenBLAS's buffers, for the CPU
 * backend (backend_cpu.c) alone: under a finite RLIMIT_AS a CPU device reserves, when created, the
 * room its GEMM slot and pool threads will need and hands it over as they map their buffers, so a
 * run that lacks it fails at the device's creation (why: docs/faults.md#resource-limits). */
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
/* Grow OpenBLAS's pool to `threads` with the room reserved for it (DDP_ERR_INPUT naming
 * --threads when some of its threads could not start: its first GEMM would wait for them). */
int blas_space_set_threads(blas_space_t *s, int threads, char *err);
/* The device's first GEMM is about to run: its slot's room goes to OpenBLAS. */
void blas_space_first_gemm(blas_space_t *s);
/* The device is gone. */
void blas_space_free(blas_space_t *s);

/* OpenBLAS's pool (why it is stopped: docs/benchmarks.md).  _pool_stop sets the count to 1 and
 * stops the pool (blas_thread_shutdown_, as OpenBLAS's fork handler does) before any device
 * exists; _threads sets the count (openblas_set_num_threads, which starts the pool again). */
void blas_space_pool_stop(void);
int blas_space_threads(int threads); /* the pool threads that did not start */

#endif
