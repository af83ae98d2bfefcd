/* dp/dp_scatter.c: how DP splits a micro-batch between its devices:
 * torch.chunk's row chunks (the group's scatter and gather move them). */
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
