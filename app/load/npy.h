/* app/load/npy.h: the NumPy .npy header, parsed from memory.
 *
 * data_npy.c reads a file's first bytes and hands them here; tests/fuzz/fuzz_npy.c
 * feeds the same function arbitrary bytes.  The parser trusts nothing: magic,
 * version, header length against the file size, a strict reader for the
 * header's Python dict literal, the dtype, the shape (overflow checked) and the
 * data size against what the file holds.  Messages carry no file name; the
 * caller prefixes it. */
#ifndef DDPBENCH_NPY_H
#define DDPBENCH_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NPY_MAX_DIMS 32
#define NPY_PREAMBLE_MAX 12               /* magic(6) + version(2) + header length(2 or 4) */
#define NPY_HEADER_MAX ((size_t)1 << 20)  /* our own limit on the dict text */

typedef enum { NPY_F4 = 0, NPY_F8, NPY_I4, NPY_I8 } npy_dtype_t;

typedef struct {
    int major, minor;          /* format version: 1.0, 2.0 or 3.0 */
    npy_dtype_t dtype;
    size_t elem_size;          /* bytes per element */
    bool fortran_order;        /* only ever true where the layout equals C order */
    int ndim;
    uint64_t shape[NPY_MAX_DIMS];
    uint64_t count;            /* elements: product of shape (1 for shape ()) */
    size_t data_offset;        /* bytes before the array data */
    size_t data_bytes;         /* count * elem_size, exactly what follows the header */
} npy_info_t;

/* buf holds the first len bytes of a file of file_size bytes; len must cover
 * the preamble and the header (min(file_size, NPY_PREAMBLE_MAX + NPY_HEADER_MAX)
 * always does).  Fills *info and returns DDP_OK, or DDP_ERR_INPUT with one line
 * in err. */
int npy_parse_header(const uint8_t *buf, size_t len, size_t file_size, npy_info_t *info,
                     char *err);

/* "(3, 4)", "(3,)" or "()", like Python prints a shape; truncated to size. */
void npy_shape_str(const npy_info_t *info, char *out, size_t size);


#endif
