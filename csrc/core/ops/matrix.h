/* matrix.h - helpers shared by the matrix families (ops/matrix.c,
 * ops/lu.c); internal to ops/. Matrices are the last two dims of a value,
 * the dims before them a batch. */
#ifndef TTPU_OPS_MATRIX_H_
#define TTPU_OPS_MATRIX_H_

#include "ttpu_lower.h"

/* The CPU's LAPACK kernels take float32/float64 only: fails the lowering
 * with NotImplementedError naming `kernel` otherwise; 1 if accepted. */
int ttpu_mx_lapack_dtype(ttpu_lower* L, ttpu_dtype dt, const char* kernel);
/* x with its last two dims swapped. */
ttpu_val ttpu_mx_transpose(ttpu_hlo* b, ttpu_val x);
/* The identity matrices of type t (batch..., n, n). */
ttpu_val ttpu_mx_identity(ttpu_hlo* b, ttpu_type t);
/* A data-dependent error: fails the call with fmt (one %lld: the largest
 * value) when any element of the integer tensor `info` is non-zero. */
void ttpu_mx_check_info(ttpu_lower* L, ttpu_val info, const char* fmt);

#endif /* TTPU_OPS_MATRIX_H_ */
