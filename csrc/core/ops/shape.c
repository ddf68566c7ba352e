/* shape.c - joining, reordering and padding ops, and the range factories:
 * cat, flip, roll, repeat, constant/reflection/replication padding (with
 * their backwards), triu/tril, narrow_copy, unfold_backward, arange,
 * linspace, eye. Every shape here is known when the program is built. */
#include <stdlib.h>

#include "ttpu_lower.h"

#define ERR TTPU_VAL_ERROR

/* Gathers x's slices along dim at the constant positions idx[0..n). */
static ttpu_val take_const(ttpu_hlo* b, ttpu_val x, int dim,
                           const int64_t* idx, int n) {
  return ttpu_l_gather_dim(b, x, dim, ttpu_hlo_const_i64s(b, idx, n));
}

/* The adjoint of take_const: sums g's slices along dim into a tensor whose
 * dim has size `size`, slice i going to position idx[i]. */
static ttpu_val add_const(ttpu_hlo* b, ttpu_val g, int dim, const int64_t* idx,
                          int n, int64_t size) {
  const ttpu_type* tp = ttpu_hlo_type(b, g);
  if (!tp) return ERR;
  ttpu_type tz = *tp;
  tz.dims[dim] = size;
  ttpu_val zero = ttpu_hlo_const(b, tz, 0, 0);
  return ttpu_l_scatter_dim(b, zero, dim, ttpu_hlo_const_i64s(b, idx, n), g,
                            TTPU_ADD);
}

/* ------------------------------------------------------------ cat */

/* cat(Tensor[] tensors, int dim=0) (and .out). 1-d empty tensors are the
 * legacy "no shape" placeholder and are skipped, as CPU does. */
static ttpu_status* lower_cat(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int n = ttpu_l_count(L, 0);
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 1, 0), ot.ndim);
  if (n == 2 && ot.ndim > 0 && ttpu_l_dyn_dims(L, 0, 0) >> dim & 1) {
    /* Bucketed (prog/bucket.c): the first operand holds a bucket along
     * dim with its true size n at run time, the second a fixed size; the
     * result's bucket may be larger. The second goes at offset n. */
    ttpu_val x = ttpu_hlo_convert(b, ttpu_l_tensor_at(L, 0, 0), ot.dtype);
    ttpu_val y = ttpu_hlo_convert(b, ttpu_l_tensor_at(L, 0, 1), ot.dtype);
    const ttpu_type* xt = ttpu_hlo_type(b, x);
    if (!xt) return NULL;
    int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS] = {0},
            in[TTPU_MAX_DIMS] = {0};
    hi[dim] = ot.dims[dim] - xt->dims[dim];
    if (hi[dim] > 0)
      x = ttpu_hlo_pad(b, x, ttpu_hlo_const_i(b, ot.dtype, 0), lo, hi, in);
    ttpu_val zero = ttpu_hlo_const_i(b, TTPU_I64, 0);
    ttpu_val starts[TTPU_MAX_DIMS];
    for (int d = 0; d < ot.ndim; ++d)
      starts[d] = d == dim ? ttpu_l_dyn_size(L) : zero;
    ttpu_l_set_out(L, 0, ttpu_hlo_dynamic_update_slice(b, x, y, starts));
    return NULL;
  }
  ttpu_val parts[64];
  ttpu_val* xs = n <= 64 ? parts : malloc(sizeof(ttpu_val) * (size_t)n);
  if (!xs) return ttpu_status_oom();
  int k = 0;
  for (int i = 0; i < n; ++i) {
    const ttpu_tensor* d = ttpu_l_tensor_desc(L, 0, i);
    if (!d) continue;
    if (d->ndim == 1 && d->sizes[0] == 0) continue;
    if (ot.ndim > 0 && d->ndim == ot.ndim && d->sizes[dim] == 0) continue;
    xs[k++] = ttpu_hlo_convert(b, ttpu_l_tensor_at(L, 0, i), ot.dtype);
  }
  ttpu_val r = k ? ttpu_hlo_concat(b, xs, k, dim) : ttpu_hlo_const(b, ot, 0, 0);
  if (xs != parts) free(xs);
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

/* ------------------------------------------------------------ reorder */

/* flip(Tensor self, int[] dims) */
static ttpu_status* lower_flip(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  int nd = ttpu_l_type(L, x).ndim, n = 0;
  const int64_t* dims = ttpu_l_ints(L, 1, &n);
  int64_t ds[TTPU_MAX_DIMS];
  int k = 0;
  for (int i = 0; i < n && k < TTPU_MAX_DIMS; ++i) {
    int64_t d = ttpu_l_dim(L, dims[i], nd);
    if (nd > 0) ds[k++] = d;
  }
  ttpu_l_set_out(L, 0, k ? ttpu_hlo_reverse(b, x, ds, k) : x);
  return NULL;
}

/* x rolled by s along dim: out[i] = x[(i - s) mod n]. */
static ttpu_val roll_dim(ttpu_hlo* b, ttpu_val x, int dim, int64_t s) {
  const ttpu_type* tp = ttpu_hlo_type(b, x);
  if (!tp) return ERR;
  ttpu_type t = *tp;
  int64_t n = t.dims[dim];
  if (n == 0) return x;
  s = ((s % n) + n) % n;
  if (s == 0) return x;
  int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int i = 0; i < t.ndim; ++i) {
    hi[i] = t.dims[i];
    st[i] = 1;
  }
  lo[dim] = n - s;
  ttpu_val tail = ttpu_hlo_slice(b, x, lo, hi, st);
  lo[dim] = 0;
  hi[dim] = n - s;
  ttpu_val head = ttpu_hlo_slice(b, x, lo, hi, st);
  ttpu_val parts[2] = {tail, head};
  return ttpu_hlo_concat(b, parts, 2, dim);
}

/* roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) */
static ttpu_status* lower_roll(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  int ns = 0, nd = 0;
  const int64_t* shifts = ttpu_l_ints(L, 1, &ns);
  const int64_t* dims = ttpu_l_ints(L, 2, &nd);
  if (nd == 0) {
    if (ns != 1)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "shifts and dimensions must align. shifts: %d, "
                              "dims:0", ns);
    ttpu_val f = ttpu_hlo_reshape(b, x, 1, (int64_t[]){ttpu_type_numel(&ot)});
    ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, roll_dim(b, f, 0, shifts[0]), ot));
    return NULL;
  }
  if (ns != nd)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "shifts and dimensions must align. shifts: %d, "
                            "dims:%d", ns, nd);
  if (ot.ndim == 0) {
    ttpu_l_set_out(L, 0, x);
    return NULL;
  }
  for (int i = 0; i < nd; ++i)
    x = roll_dim(b, x, (int)ttpu_l_dim(L, dims[i], ot.ndim), shifts[i]);
  ttpu_l_set_out(L, 0, x);
  return NULL;
}

/* repeat(Tensor self, SymInt[] repeats): self tiled; extra leading repeats
 * add dims. Broadcast (r0, s0, r1, s1, ...) then merge pairs. */
static ttpu_status* lower_repeat(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int nr = 0;
  const int64_t* reps = ttpu_l_ints(L, 1, &nr);
  if (nr < tx.ndim || 2 * nr > TTPU_MAX_DIMS) {
    if (nr < tx.ndim)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "Number of dimensions of repeat dims can not be "
                              "smaller than number of dimensions of tensor");
    return ttpu_status_make(TTPU_UNIMPLEMENTED,
                            "repeat over %d dims exceeds %d dims internally",
                            nr, TTPU_MAX_DIMS);
  }
  if (ttpu_type_numel(&ot) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  int64_t s[TTPU_MAX_DIMS], pair[TTPU_MAX_DIMS], ones[TTPU_MAX_DIMS];
  for (int i = 0; i < nr; ++i) {
    int j = i - (nr - tx.ndim);
    s[i] = j >= 0 ? tx.dims[j] : 1;
    ones[2 * i] = 1;
    ones[2 * i + 1] = s[i];
    pair[2 * i] = reps[i];
    pair[2 * i + 1] = s[i];
  }
  x = ttpu_hlo_reshape(b, x, 2 * nr, ones);
  x = ttpu_hlo_broadcast_to(b, x, 2 * nr, pair);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, x, ot));
  return NULL;
}

/* ------------------------------------------------------------ padding */

/* constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0): pad pairs
 * start at the last dim; negative pads crop. */
static ttpu_status* lower_constant_pad(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  int np = 0;
  const int64_t* pad = ttpu_l_ints(L, 1, &np);
  if (np % 2 || np / 2 > tx.ndim)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "Length of pad must be even but instead it "
                            "equals %d", np);
  int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS] = {0};
  for (int i = 0; i < np / 2; ++i) {
    lo[tx.ndim - 1 - i] = pad[2 * i];
    hi[tx.ndim - 1 - i] = pad[2 * i + 1];
  }
  ttpu_val v = ttpu_l_is_none(L, 2) ? ttpu_hlo_const_i(b, tx.dtype, 0)
                                    : ttpu_l_scalar(L, 2, tx.dtype);
  ttpu_val r;
  int dyn = ttpu_l_dyn_dims(L, 0, -1);
  if (dyn && ttpu_type_numel(&tx) > 0) {
    /* Bucketed (prog/bucket.c): the padded dim d is padded at its true
     * end: its bucket grows to the output's, and every position from the
     * true size on takes the value (the amount is not in the program: the
     * same program pads a mask to a fixed length at any true size). */
    int d = __builtin_ctz((unsigned)dyn);
    hi[d] = ot.dims[d] - tx.dims[d];
    r = ttpu_hlo_pad(b, x, v, lo, hi, NULL);
    r = ttpu_hlo_select(b, ttpu_l_dyn_past(L, ot, d),
                        ttpu_hlo_broadcast_to(b, v, ot.ndim, ot.dims), r);
  } else if (ttpu_type_numel(&ot) == 0) {
    r = ttpu_hlo_const(b, ot, 0, 0);
  } else if (ttpu_type_numel(&tx) == 0) {
    r = ttpu_hlo_broadcast_to(b, v, ot.ndim, ot.dims);
  } else {
    r = ttpu_hlo_pad(b, x, v, lo, hi, NULL);
  }
  ttpu_l_set_out(L, 0, r);
  return NULL;
}

typedef enum { PAD_REFLECT, PAD_REPLICATE } pad_mode;

/* Source position of each of the n + lo + hi output positions. */
static int pad_map(int64_t n, int64_t lo, int64_t hi, pad_mode mode,
                   int64_t* out) {
  int64_t m = n + lo + hi;
  for (int64_t j = 0; j < m; ++j) {
    int64_t s = j - lo;
    if (mode == PAD_REFLECT) {
      if (s < 0) s = -s;
      if (s >= n) s = 2 * (n - 1) - s;
    } else {
      s = s < 0 ? 0 : s >= n ? n - 1 : s;
    }
    if (s < 0 || s >= n) return 0;
    out[j] = s;
  }
  return 1;
}

/* The k padded dims (the last k) of a value, each as a gather (forward) or
 * its adjoint (backward) with the constant position map. */
static ttpu_status* pad_common(ttpu_lower* L) {
  pad_mode mode = (pad_mode)ttpu_l_param_at(L, 0);
  int k = (int)ttpu_l_param_at(L, 1);
  int backward = (int)ttpu_l_param_at(L, 2);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type self = ttpu_l_type(L, x);
  if (backward) { /* only the geometry of self is needed, not its data */
    const ttpu_tensor* d = ttpu_l_tensor_desc(L, 1, -1);
    if (!d) return ttpu_status_make(TTPU_INTERNAL, "padding backward: no self");
    self = ttpu_type_make(d->dtype, d->ndim, d->sizes);
  }
  int np = 0;
  const int64_t* pad = ttpu_l_ints(L, backward ? 2 : 1, &np);
  if (np != 2 * k || self.ndim < k)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "padding size is expected "
                            "to be %d", 2 * k);
  if (ttpu_type_numel(&ot) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  ttpu_dtype dt = ttpu_l_type(L, x).dtype;
  if (backward && (dt == TTPU_BF16 || dt == TTPU_F16))
    x = ttpu_hlo_convert(b, x, TTPU_F32);
  for (int i = 0; i < k; ++i) {
    int dim = self.ndim - 1 - i;
    int64_t n = self.dims[dim], lo = pad[2 * i], hi = pad[2 * i + 1];
    int64_t m = n + lo + hi;
    if (m <= 0 || n <= 0 || m > (1 << 26))
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "invalid padding %lld, %lld for a dim of size %lld",
                              (long long)lo, (long long)hi, (long long)n);
    int64_t* map = malloc((size_t)m * sizeof(int64_t));
    if (!map) return ttpu_status_oom();
    if (!pad_map(n, lo, hi, mode, map)) {
      free(map);
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "Argument #%d: Padding size should be less than "
                              "the corresponding input dimension, but got: "
                              "padding (%lld, %lld) at dimension %d of input "
                              "with size %lld", 4, (long long)lo, (long long)hi,
                              dim, (long long)n);
    }
    x = backward ? add_const(b, x, dim, map, (int)m, n)
                 : take_const(b, x, dim, map, (int)m);
    free(map);
  }
  ttpu_l_set_out(L, 0, x);
  return NULL;
}

/* ------------------------------------------------------------ triangles */

/* triu/tril(Tensor self, SymInt diagonal=0) (+ in place, .out): keeps
 * col - row >= diagonal (triu) or <= diagonal (tril) of the last 2 dims. */
static ttpu_status* tri_common(ttpu_lower* L) {
  int upper = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  if (tx.ndim < 2)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "%s: input tensor must have at least 2 dimensions",
                            upper ? "triu" : "tril");
  int64_t diag = ttpu_l_int(L, 1, 0);
  int64_t rc[2] = {tx.dims[tx.ndim - 2], tx.dims[tx.ndim - 1]};
  ttpu_type t2 = ttpu_type_make(TTPU_I64, 2, rc);
  ttpu_val d = ttpu_hlo_binary(b, TTPU_SUB, ttpu_hlo_iota(b, t2, 1),
                               ttpu_hlo_iota(b, t2, 0));
  ttpu_val keep = ttpu_hlo_compare(b, upper ? TTPU_GE : TTPU_LE, d,
                                   ttpu_hlo_const(b, t2, 0, diag));
  int64_t map[2] = {tx.ndim - 2, tx.ndim - 1};
  ttpu_type tk = tx;
  tk.dtype = TTPU_BOOL;
  keep = ttpu_hlo_broadcast_in_dim(b, keep, tk, map);
  ttpu_val r = ttpu_hlo_select(b, keep, x, ttpu_hlo_const(b, tx, 0, 0));
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ot));
  return NULL;
}

/* ------------------------------------------------------------ slicing */

/* narrow_copy(Tensor self, int dim, SymInt start, SymInt length) */
static ttpu_status* lower_narrow_copy(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type tx = ttpu_l_type(L, x);
  if (tx.ndim == 0)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "narrow() cannot be applied to a 0-dim tensor.");
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 1, 0), tx.ndim);
  int64_t start = ttpu_l_int(L, 2, 0), len = ttpu_l_int(L, 3, 0);
  if (start < 0) start += tx.dims[dim];
  int64_t lo[TTPU_MAX_DIMS] = {0}, hi[TTPU_MAX_DIMS], st[TTPU_MAX_DIMS];
  for (int i = 0; i < tx.ndim; ++i) {
    hi[i] = tx.dims[i];
    st[i] = 1;
  }
  lo[dim] = start;
  hi[dim] = start + len;
  if (start < 0 || start + len > tx.dims[dim] || len < 0)
    return ttpu_status_make(TTPU_INDEX_ERROR,
                            "start (%lld) + length (%lld) exceeds dimension "
                            "size (%lld).", (long long)start, (long long)len,
                            (long long)tx.dims[dim]);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, ttpu_hlo_slice(b, x, lo, hi, st), ot));
  return NULL;
}

/* unfold_backward(Tensor grad_in, SymInt[] input_sizes, int dim, int size,
 * int step): window w, element k of grad_in adds into input position
 * w * step + k along dim. */
static ttpu_status* lower_unfold_backward(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val g = ttpu_l_tensor(L, 0);
  ttpu_type tg = ttpu_l_type(L, g);
  int64_t size = ttpu_l_int(L, 3, 1), step = ttpu_l_int(L, 4, 1);
  if (ot.ndim == 0) { /* unfold of a 0-d tensor: one window of one */
    ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, g, ot));
    return NULL;
  }
  int dim = (int)ttpu_l_dim(L, ttpu_l_int(L, 2, 0), ot.ndim);
  int64_t nw = tg.dims[dim];
  if (ttpu_type_numel(&tg) == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  /* (..., W, ..., K) -> (..., W, K, ...) -> (..., W*K, ...) */
  int64_t perm[TTPU_MAX_DIMS], merged[TTPU_MAX_DIMS];
  int r = tg.ndim, k = 0;
  for (int i = 0; i < r - 1; ++i) {
    perm[k++] = i;
    if (i == dim) perm[k++] = r - 1;
  }
  g = ttpu_hlo_transpose(b, g, perm);
  for (int i = 0, j = 0; i < r - 1; ++i) merged[j++] = i == dim ? nw * size : tg.dims[i];
  g = ttpu_hlo_reshape(b, g, r - 1, merged);
  int64_t n = nw * size;
  int64_t* map = malloc((size_t)(n ? n : 1) * sizeof(int64_t));
  if (!map) return ttpu_status_oom();
  for (int64_t w = 0; w < nw; ++w)
    for (int64_t e = 0; e < size; ++e) map[w * size + e] = w * step + e;
  ttpu_dtype dt = tg.dtype;
  if (dt == TTPU_BF16 || dt == TTPU_F16) g = ttpu_hlo_convert(b, g, TTPU_F32);
  ttpu_val r2 = add_const(b, g, dim, map, (int)n, ot.dims[dim]);
  free(map);
  ttpu_l_set_out(L, 0, r2);
  return NULL;
}

/* ------------------------------------------------------------ factories */

/* The float type range arithmetic runs in: f64 only for f64 outputs (TPUs
 * have no fast f64), f32 otherwise. */
static ttpu_dtype range_dtype(ttpu_dtype out) {
  if (ttpu_dtype_is_float(out)) return out == TTPU_F64 ? TTPU_F64 : TTPU_F32;
  return TTPU_I64;
}

/* arange.start_out(Scalar start, Scalar end, Scalar step=1, *,
 * Tensor(a!) out): out[i] = start + i * step (the size came from the meta
 * kernel). */
static ttpu_status* lower_arange(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype ct = range_dtype(ot.dtype);
  /* An out of as many elements keeps its shape (the CPU resizes only an
   * out of another size): the values fill it in row-major order. */
  int64_t n = ttpu_type_numel(&ot);
  ttpu_type t = ttpu_type_make(ct, 1, &n);
  ttpu_val start = ttpu_l_scalar(L, 0, ct);
  ttpu_val step = ttpu_l_is_none(L, 2) ? ttpu_hlo_const_i(b, ct, 1)
                                       : ttpu_l_scalar(L, 2, ct);
  ttpu_val i = ttpu_hlo_iota(b, t, 0);
  ttpu_val r = ttpu_hlo_binary(
      b, TTPU_ADD, ttpu_hlo_broadcast_to(b, start, t.ndim, t.dims),
      ttpu_hlo_binary(b, TTPU_MUL, i, ttpu_hlo_broadcast_to(b, step, t.ndim, t.dims)));
  ttpu_l_set_out(L, 0, ttpu_hlo_reshape(b, r, ot.ndim, ot.dims));
  return NULL;
}

/* CPU's linspace (ttpu_l_linspace) in type ct, with start and end first
 * converted to the output's dtype `dt` as CPU does. */
static ttpu_val lin_values(ttpu_lower* L, ttpu_dtype dt, ttpu_dtype ct,
                           int64_t steps) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val start = ttpu_hlo_convert(b, ttpu_l_scalar(L, 0, dt), ct);
  ttpu_val end = ttpu_hlo_convert(b, ttpu_l_scalar(L, 1, dt), ct);
  return ttpu_l_linspace(b, start, end, steps, ct);
}

/* linspace.out(Scalar start, Scalar end, int steps, *, Tensor(a!) out):
 * floats and complex values computed in their own type (CPU's step is of
 * the output type), integers through f64 and truncation. */
static ttpu_status* lower_linspace(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype ct = ttpu_dtype_is_float(ot.dtype) || ttpu_dtype_is_complex(ot.dtype) ? ot.dtype : TTPU_F64;
  /* an out of steps elements keeps its shape (the CPU resizes only an out
   * of another size): the values fill it in row-major order */
  ttpu_val v = lin_values(L, ot.dtype, ct, ttpu_type_numel(&ot));
  ttpu_l_set_out(L, 0, ttpu_hlo_reshape(ttpu_l_hlo(L), v, ot.ndim, ot.dims));
  return NULL;
}

/* logspace.out(Scalar start, Scalar end, int steps, float base=10., *,
 * Tensor(a!) out): base ** linspace. CPU runs the exponent and the power in
 * double; f32 is close enough for float outputs (TPUs lack fast f64), f64
 * keeps integer results exact before truncation. */
static ttpu_status* lower_logspace(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_dtype ct = range_dtype(ot.dtype) == TTPU_F32 ? TTPU_F32 : TTPU_F64;
  ttpu_val e = lin_values(L, ot.dtype, ct, ttpu_type_numel(&ot));
  e = ttpu_hlo_reshape(b, e, ot.ndim, ot.dims);  /* as linspace's */
  ttpu_type t = ot;
  t.dtype = ct;
  ttpu_val base = ttpu_hlo_const(b, t, ttpu_l_float(L, 3, 10.0), 0);
  ttpu_l_set_out(L, 0, ttpu_hlo_binary(b, TTPU_POW, base, e));
  return NULL;
}

/* eye.out(SymInt n, *, Tensor(a!) out) / eye.m_out(SymInt n, SymInt m, *,
 * Tensor(a!) out) */
static ttpu_status* lower_eye(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_type t = ot;
  t.dtype = TTPU_I64;
  ttpu_val on = ttpu_hlo_compare(b, TTPU_EQ, ttpu_hlo_iota(b, t, 0),
                                 ttpu_hlo_iota(b, t, 1));
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, on, ot.dtype));
  return NULL;
}

const ttpu_op_def ttpu_ops_shape[] = {
    {"cat", lower_cat, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {"flip", lower_flip, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"roll", lower_roll, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"repeat", lower_repeat, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"constant_pad_nd", lower_constant_pad, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"reflection_pad1d", pad_common, .param = TTPU_PARAMS(PAD_REFLECT, 1, 0)},
    {"reflection_pad2d", pad_common, .param = TTPU_PARAMS(PAD_REFLECT, 2, 0)},
    {"reflection_pad3d", pad_common, .param = TTPU_PARAMS(PAD_REFLECT, 3, 0)},
    {"replication_pad1d", pad_common, .param = TTPU_PARAMS(PAD_REPLICATE, 1, 0)},
    {"replication_pad2d", pad_common, .param = TTPU_PARAMS(PAD_REPLICATE, 2, 0)},
    {"replication_pad3d", pad_common, .param = TTPU_PARAMS(PAD_REPLICATE, 3, 0)},
    {"reflection_pad1d_backward", pad_common, .param = TTPU_PARAMS(PAD_REFLECT, 1, 1)},
    {"reflection_pad2d_backward", pad_common, .param = TTPU_PARAMS(PAD_REFLECT, 2, 1)},
    {"reflection_pad3d_backward", pad_common, .param = TTPU_PARAMS(PAD_REFLECT, 3, 1)},
    {"replication_pad1d_backward", pad_common, .param = TTPU_PARAMS(PAD_REPLICATE, 1, 1)},
    {"replication_pad2d_backward", pad_common, .param = TTPU_PARAMS(PAD_REPLICATE, 2, 1)},
    {"replication_pad3d_backward", pad_common, .param = TTPU_PARAMS(PAD_REPLICATE, 3, 1)},
    {"triu", tri_common, .flags = TTPU_OP_COMPLEX_AS_IS, .param = 1, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"tril", tri_common, .flags = TTPU_OP_COMPLEX_AS_IS, .param = 0, .variants = TTPU_V_INPLACE | TTPU_V_OUT},
    {"narrow_copy", lower_narrow_copy, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"unfold_backward", lower_unfold_backward, .flags = 0},
    {"arange.start_out", lower_arange, .flags = 0},
    /* torch.range: the meta kernel's size includes the end */
    {"range.out", lower_arange, .flags = 0},
    {"linspace.out", lower_linspace, .flags = TTPU_OP_COMPLEX_AS_IS},
    {"logspace.out", lower_logspace, .flags = 0},
    {"eye.m_out", lower_eye, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {0},
};
