/* dp/dp_scatter.c: how DP splits the work: torch.chunk row chunks of a
 * micro-batch, and the per-worker slices of a parameter arena that the
 * replicate and the reduce divide between threads. */
#include "dp/dp.h"

// ---------------------------------------------------------------------------
// row chunks (torch.chunk along dim 0)

dp_chunk_t dp_chunk(int batch, int k, int d)
{
    dp_chunk_t c = {0, 0};
    if (batch <= 0 || k <= 0)
        return c;
    int size = (batch + k - 1) / k; /* torch.chunk: ceil(batch / chunks) */
    long off = (long)d * size;
    if (off >= batch)
        return c; /* torch.chunk returned fewer chunks: this device sits out */
    c.off = (int)off;
    c.rows = batch - c.off < size ? batch - c.off : size;
    return c;
}

int dp_chunk_count(int batch, int k)
{
    if (batch <= 0 || k <= 0)
        return 0;
    int size = (batch + k - 1) / k;
    return (batch + size - 1) / size;
}

// ---------------------------------------------------------------------------
// arena slices

#define DP_SLICE_ALIGN 16 /* floats in a 64-byte cache line */

void dp_slice(size_t n, int k, int w, size_t *lo, size_t *hi)
{
    /* Boundaries at multiples of a cache line, so two workers never write the
     * same line (no false sharing) and every slice starts aligned. */
    size_t lines = (n + DP_SLICE_ALIGN - 1) / DP_SLICE_ALIGN;
    size_t a = lines * (size_t)w / (size_t)k * DP_SLICE_ALIGN;
    size_t b = lines * (size_t)(w + 1) / (size_t)k * DP_SLICE_ALIGN;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}

/* Why not always sliced: the slices of the sum must all be on device 0
 * before its optimizer reads them, which takes a barrier of its own, and
 * each slice of a replica is written by another core than the one that
 * reads it next.  On the seed-size model (110 floats) that barrier and
 * those lines moving between cores were most of the reduce and replicate;
 * below DP_SLICED_MIN floats (16 KiB) one thread moves the arena in less
 * time than a barrier takes (dp_comm.c). */
#define DP_SLICED_MIN 4096

bool dp_sliced(size_t n) { return n >= DP_SLICED_MIN; }
