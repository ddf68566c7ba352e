/* matrix.h - helpers shared by the matrix families (ops/matrix.c, lu.c,
 * eigh.c, svd.c, lstsq.c); internal to ops/. Matrices are the last two dims of a value,
 * the dims before them a batch. */
#ifndef TTPU_OPS_MATRIX_H_
#define TTPU_OPS_MATRIX_H_

#include "ttpu_lower.h"

/* The CPU's LAPACK kernels take float32/float64 and complex64/complex128
 * only: fails the lowering with NotImplementedError naming `kernel`
 * otherwise; 1 if accepted. (A complex call reaches a lowering only where
 * its record names it as the complex lowering too.) */
int ttpu_mx_lapack_dtype(ttpu_lower* L, ttpu_dtype dt, const char* kernel);
/* x with its last two dims swapped. */
ttpu_val ttpu_mx_transpose(ttpu_hlo* b, ttpu_val x);
/* conj(x): x itself when real. */
ttpu_val ttpu_mx_conj(ttpu_hlo* b, ttpu_val x);
/* x^H: the conjugate transpose of the last two dims (x^T when real). */
ttpu_val ttpu_mx_adjoint(ttpu_hlo* b, ttpu_val x);
/* |x|^2 elementwise, in x's real component dtype. */
ttpu_val ttpu_mx_abs2(ttpu_hlo* b, ttpu_val x);
/* The identity matrices of type t (batch..., n, n). */
ttpu_val ttpu_mx_identity(ttpu_hlo* b, ttpu_type t);
/* A data-dependent error (torch.linalg.LinAlgError, TTPU_LINALG_ERROR, or a
 * RuntimeError for lu_factor, as the CPU raises them), as PyTorch's
 * _linalg_check_errors words it:
 * when an element of the integer tensor `info` (batch...) is non-zero the
 * call fails with "<who>: <body>", or "<who>: (Batch element k): <body>"
 * for a batched `info` (k the first failing element, flattened); body's
 * %lld conversions (at most two) all take that element's info value. */
void ttpu_mx_check_info(ttpu_lower* L, ttpu_val info, const char* who, const char* body);
/* ttpu_mx_check_info preceded by a refusal: when any element of the bool
 * tensor `refuse` is true the call fails with `refusal` (a message with no
 * conversions) instead, whatever `info` holds. The two share the check's
 * one error type. */
void ttpu_mx_check_info_unless(ttpu_lower* L, ttpu_val refuse, const char* refusal,
                               ttpu_val info, const char* who, const char* body);

/* v (batch...: t's first nb dims) broadcast into t's shape, keeping v's
 * dtype; spread_vec: v (batch..., len) broadcast into t (batch..., r, c)
 * with its last dim along dim `at` (nb or nb + 1). */
ttpu_val ttpu_mx_spread(ttpu_hlo* b, ttpu_val v, ttpu_type t, int nb);
ttpu_val ttpu_mx_spread_vec(ttpu_hlo* b, ttpu_val v, ttpu_type t, int nb, int at);

/* A counted loop (stablehlo.while) for j = 0 .. trips - 1, or from
 * trips - 1 down to 0 when reverse: the program holds one trip whatever
 * the count. The loop state is init[0..n) (n at most 15); each trip
 * body(b, ctx, j, st, next) sees j (a 0-d i64) and the state and writes
 * the next state. fin receives the last state (init itself for
 * trips <= 0). */
typedef void (*ttpu_mx_fori_body)(ttpu_hlo* b, void* ctx, ttpu_val j, const ttpu_val* st, ttpu_val* next);
void ttpu_mx_fori(ttpu_hlo* b, int64_t trips, int reverse, const ttpu_val* init, int n, ttpu_mx_fori_body body,
                  void* ctx, ttpu_val* fin);

/* The Jacobi rotation zeroing apq in [[app, apq], [apq, aqq]], elementwise
 * over vectors of type tv (one entry per column of a pairing; lo marks the
 * lower column p of its pair p < q): *t = tan of the angle, the smaller root
 * of t^2 + 2 theta t - 1 = 0 with theta = (aqq - app) / (2 apq), computed
 * without cancellation and 0 where skip; *c = cos; *sj = -sin on the lower
 * column and sin on the upper, as the rotation matrix holds them
 * (J[q,p] = -s, J[p,q] = s). Used by eigh (two-sided) and the SVD
 * (one-sided, on the columns' inner products). */
void ttpu_mx_jacobi_rotation(ttpu_hlo* b, ttpu_type tv, ttpu_val app, ttpu_val aqq,
                             ttpu_val apq, ttpu_val skip, ttpu_val lo, ttpu_val* t,
                             ttpu_val* c, ttpu_val* sj);

/* One-sided Jacobi (svd.c) on w (batch..., p, q), p >= q, real or
 * complex: *wf receives W V / scale, whose columns are mutually orthogonal
 * (in w's column order; their norms the singular values over scale), *v
 * (when v is not NULL and vectors is set) the unitary V (batch..., q, q),
 * and *scale (batch..., real) the largest |entry| of each matrix (1 for a
 * zero matrix), which W is divided by first. */
void ttpu_mx_hestenes(ttpu_hlo* b, ttpu_val w, int vectors, ttpu_val* wf, ttpu_val* v, ttpu_val* scale);

#endif /* TTPU_OPS_MATRIX_H_ */
