/* hlo_index.c - gather, scatter and the flat take/put built on them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hlo_internal.h"
#include "ttpu_hlo.h"

static void put_field(ttpu_hloi_buf* a, int* first, const char* name,
                      const int64_t* v, int n, int always) {
  if (!n && !always) return;
  ttpu_hloi_buf_printf(a, "%s%s = ", *first ? "" : ", ", name);
  ttpu_hloi_put_list(a, v, n);
  *first = 0;
}

/* Every entry in range [0, rank) and distinct. */
static int dims_ok(const int64_t* v, int n, int rank) {
  int seen[TTPU_MAX_DIMS + 1] = {0};
  if (n < 0 || n > rank) return 0;
  for (int i = 0; i < n; i++) {
    if (v[i] < 0 || v[i] >= rank || seen[v[i]]) return 0;
    seen[v[i]] = 1;
  }
  return 1;
}

static int contains(const int64_t* v, int n, int64_t x) {
  for (int i = 0; i < n; i++)
    if (v[i] == x) return 1;
  return 0;
}

/* Batch dims of an index tensor: all its dims but index_vector_dim (which
 * may equal its rank, meaning an implicit trailing 1). */
static int index_batch_dims(const ttpu_type* ti, int64_t ivd, int64_t* out) {
  int n = 0;
  for (int i = 0; i < ti->ndim; i++)
    if (i != ivd) out[n++] = ti->dims[i];
  return n;
}

ttpu_val ttpu_hlo_gather(ttpu_hlo* b, ttpu_val operand, ttpu_val indices,
                         const ttpu_gather_dims* dn, ttpu_type out) {
  const char* what = "stablehlo.gather";
  const ttpu_type* to = ttpu_hloi_check(b, operand, what);
  const ttpu_type* ti = ttpu_hloi_check(b, indices, what);
  if (!to || !ti || !ttpu_hloi_type_ok(b, &out, what)) return TTPU_VAL_ERROR;
  if (!ttpu_hloi_is_intlike(ti->dtype))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: indices must be integers, got %s", what,
                         ttpu_dtype_name(ti->dtype));
  if (out.dtype != to->dtype)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: result dtype differs from operand", what);
  int64_t ivd = dn->index_vector_dim;
  int64_t nvec = ivd == ti->ndim ? 1 : (ivd >= 0 && ivd < ti->ndim)
                                           ? ti->dims[ivd] : -1;
  if (nvec < 0 || nvec != dn->n_start_index_map ||
      !dims_ok(dn->start_index_map, dn->n_start_index_map, to->ndim) ||
      !dims_ok(dn->collapsed_slice_dims, dn->n_collapsed_slice_dims,
               to->ndim) ||
      !dims_ok(dn->operand_batching_dims, dn->n_operand_batching_dims,
               to->ndim) ||
      dn->n_operand_batching_dims != dn->n_start_indices_batching_dims ||
      !dims_ok(dn->start_indices_batching_dims,
               dn->n_start_indices_batching_dims, ti->ndim) ||
      !dims_ok(dn->offset_dims, dn->n_offset_dims, out.ndim))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: inconsistent dimension numbers", what);
  /* Implied result shape: offset dims at offset_dims, batch dims elsewhere
   * in order. */
  int64_t offs[TTPU_MAX_DIMS];
  int n_off = 0;
  for (int i = 0; i < to->ndim; i++) {
    if (dn->slice_sizes[i] < 0 || dn->slice_sizes[i] > to->dims[i])
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                           "%s: slice size %lld out of range for dim %d", what,
                           (long long)dn->slice_sizes[i], i);
    if (contains(dn->collapsed_slice_dims, dn->n_collapsed_slice_dims, i) ||
        contains(dn->operand_batching_dims, dn->n_operand_batching_dims, i)) {
      if (dn->slice_sizes[i] > 1)
        return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                             "%s: collapsed dim %d needs slice size <= 1", what,
                             i);
      continue;
    }
    offs[n_off++] = dn->slice_sizes[i];
  }
  int64_t bat[TTPU_MAX_DIMS];
  int n_bat = index_batch_dims(ti, ivd, bat);
  if (n_off != dn->n_offset_dims || n_off + n_bat != out.ndim)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: result rank %d, implied %d", what, out.ndim,
                         n_off + n_bat);
  for (int i = 0, io = 0, ib = 0; i < out.ndim; i++) {
    int64_t want = contains(dn->offset_dims, dn->n_offset_dims, i)
                       ? offs[io++] : bat[ib++];
    if (out.dims[i] != want)
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                           "%s: result dim %d is %lld, implied %lld", what, i,
                           (long long)out.dims[i], (long long)want);
  }
  ttpu_hloi_buf a = {0};
  int first = 1;
  ttpu_hloi_buf_put(&a, "dimension_numbers = #stablehlo.gather<");
  put_field(&a, &first, "offset_dims", dn->offset_dims, dn->n_offset_dims, 0);
  put_field(&a, &first, "collapsed_slice_dims", dn->collapsed_slice_dims,
            dn->n_collapsed_slice_dims, 0);
  put_field(&a, &first, "operand_batching_dims", dn->operand_batching_dims,
            dn->n_operand_batching_dims, 0);
  put_field(&a, &first, "start_indices_batching_dims",
            dn->start_indices_batching_dims,
            dn->n_start_indices_batching_dims, 0);
  put_field(&a, &first, "start_index_map", dn->start_index_map,
            dn->n_start_index_map, 0);
  ttpu_hloi_buf_printf(&a, "%sindex_vector_dim = %lld>, slice_sizes = ",
                       first ? "" : ", ", (long long)ivd);
  ttpu_hloi_put_array(&a, dn->slice_sizes, to->ndim);
  ttpu_hloi_buf_put(&a, ", indices_are_sorted = false");
  char* attrs = ttpu_hloi_buf_take(&a);
  ttpu_val ops[2] = {operand, indices};
  ttpu_val v = ttpu_hloi_op(b, what, ops, 2, attrs, out);
  free(attrs);
  return v;
}

static char* scatter_region(ttpu_hlo* b, ttpu_dtype dt, int combine) {
  ttpu_type st[2] = {ttpu_hloi_scalar_type(dt), ttpu_hloi_scalar_type(dt)};
  ttpu_val a[2];
  ttpu_hloi_region_begin(b, st, 2, a);
  ttpu_val r = combine == TTPU_SCATTER_SET
                   ? a[1] : ttpu_hlo_binary(b, (ttpu_binop)combine, a[0], a[1]);
  char* region = ttpu_hloi_region_end(b, &r, 1);
  if (!region) return NULL;
  ttpu_hloi_buf s = {0};
  ttpu_hloi_buf_put(&s, "(");
  ttpu_hloi_buf_put(&s, region);
  ttpu_hloi_buf_put(&s, ")");
  free(region);
  return ttpu_hloi_buf_take(&s);
}

ttpu_val ttpu_hlo_scatter(ttpu_hlo* b, ttpu_val operand, ttpu_val indices,
                          ttpu_val updates, const ttpu_scatter_dims* dn,
                          int combine) {
  const char* what = "stablehlo.scatter";
  const ttpu_type* to = ttpu_hloi_check(b, operand, what);
  const ttpu_type* ti = ttpu_hloi_check(b, indices, what);
  const ttpu_type* tu = ttpu_hloi_check(b, updates, what);
  if (!to || !ti || !tu) return TTPU_VAL_ERROR;
  if (!ttpu_hloi_is_intlike(ti->dtype))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: indices must be integers, got %s", what,
                         ttpu_dtype_name(ti->dtype));
  if (tu->dtype != to->dtype)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: updates dtype differs from operand", what);
  if (combine != TTPU_SCATTER_SET && (combine < TTPU_ADD || combine > TTPU_SHR_L))
    return ttpu_hlo_fail(b, TTPU_INTERNAL, "%s: bad combiner %d", what,
                         combine);
  int64_t ivd = dn->index_vector_dim;
  int64_t nvec = ivd == ti->ndim ? 1 : (ivd >= 0 && ivd < ti->ndim)
                                           ? ti->dims[ivd] : -1;
  if (nvec < 0 || nvec != dn->n_scatter_dims_to_operand_dims ||
      !dims_ok(dn->scatter_dims_to_operand_dims,
               dn->n_scatter_dims_to_operand_dims, to->ndim) ||
      !dims_ok(dn->inserted_window_dims, dn->n_inserted_window_dims,
               to->ndim) ||
      !dims_ok(dn->input_batching_dims, dn->n_input_batching_dims, to->ndim) ||
      dn->n_input_batching_dims != dn->n_scatter_indices_batching_dims ||
      !dims_ok(dn->scatter_indices_batching_dims,
               dn->n_scatter_indices_batching_dims, ti->ndim) ||
      !dims_ok(dn->update_window_dims, dn->n_update_window_dims, tu->ndim) ||
      dn->n_update_window_dims + dn->n_inserted_window_dims +
              dn->n_input_batching_dims != to->ndim)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: inconsistent dimension numbers", what);
  /* updates = scatter batch dims (index dims but the vector dim) plus
   * window dims; window sizes must fit in the operand. */
  int64_t bat[TTPU_MAX_DIMS];
  int n_bat = index_batch_dims(ti, ivd, bat);
  if (n_bat + dn->n_update_window_dims != tu->ndim)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "%s: updates rank %d, implied %d", what, tu->ndim,
                         n_bat + dn->n_update_window_dims);
  for (int i = 0, ib = 0, od = 0; i < tu->ndim; i++) {
    if (contains(dn->update_window_dims, dn->n_update_window_dims, i)) {
      while (contains(dn->inserted_window_dims, dn->n_inserted_window_dims,
                      od) ||
             contains(dn->input_batching_dims, dn->n_input_batching_dims, od))
        od++;
      if (tu->dims[i] > to->dims[od])
        return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                             "%s: update window dim %d larger than operand",
                             what, i);
      od++;
    } else if (tu->dims[i] != bat[ib++]) {
      return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                           "%s: updates dim %d does not match indices", what,
                           i);
    }
  }
  /* By value: building the region adds values, which may move the value
   * array that `to` points into. */
  ttpu_type r = *to;
  char* regions = scatter_region(b, r.dtype, combine);
  if (!regions) return TTPU_VAL_ERROR;
  ttpu_hloi_buf a = {0};
  int first = 1;
  ttpu_hloi_buf_put(&a, "scatter_dimension_numbers = #stablehlo.scatter<");
  put_field(&a, &first, "update_window_dims", dn->update_window_dims,
            dn->n_update_window_dims, 0);
  put_field(&a, &first, "inserted_window_dims", dn->inserted_window_dims,
            dn->n_inserted_window_dims, 0);
  put_field(&a, &first, "input_batching_dims", dn->input_batching_dims,
            dn->n_input_batching_dims, 0);
  put_field(&a, &first, "scatter_indices_batching_dims",
            dn->scatter_indices_batching_dims,
            dn->n_scatter_indices_batching_dims, 0);
  put_field(&a, &first, "scatter_dims_to_operand_dims",
            dn->scatter_dims_to_operand_dims,
            dn->n_scatter_dims_to_operand_dims, 0);
  ttpu_hloi_buf_printf(&a,
                       "%sindex_vector_dim = %lld>, indices_are_sorted = "
                       "false, unique_indices = false",
                       first ? "" : ", ", (long long)ivd);
  char* attrs = ttpu_hloi_buf_take(&a);
  ttpu_val ops[3] = {operand, indices, updates};
  ttpu_val v = ttpu_hloi_emit(b, what, ops, 3, regions, attrs, &r, 1, NULL);
  free(regions);
  free(attrs);
  return v;
}

ttpu_val ttpu_hlo_take(ttpu_hlo* b, ttpu_val x1d, ttpu_val idx) {
  const ttpu_type* tx = ttpu_hloi_check(b, x1d, "take");
  const ttpu_type* ti = ttpu_hloi_check(b, idx, "take");
  if (!tx || !ti) return TTPU_VAL_ERROR;
  if (tx->ndim != 1)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "take: operand must be 1-d, has rank %d", tx->ndim);
  /* index_vector_dim = rank(idx): every index element is a whole
   * 1-element start vector, so the result has exactly idx's shape. */
  static const int64_t zero[1] = {0};
  static const int64_t one[1] = {1};
  ttpu_gather_dims dn;
  memset(&dn, 0, sizeof dn);
  dn.n_collapsed_slice_dims = 1;
  dn.collapsed_slice_dims = zero;
  dn.n_start_index_map = 1;
  dn.start_index_map = zero;
  dn.index_vector_dim = ti->ndim;
  dn.slice_sizes = one;
  ttpu_type out = *ti;
  out.dtype = tx->dtype;
  return ttpu_hlo_gather(b, x1d, idx, &dn, out);
}

ttpu_val ttpu_hlo_put(ttpu_hlo* b, ttpu_val x1d, ttpu_val idx, ttpu_val upd,
                      int combine) {
  const ttpu_type* tx = ttpu_hloi_check(b, x1d, "put");
  const ttpu_type* ti = ttpu_hloi_check(b, idx, "put");
  const ttpu_type* tu = ttpu_hloi_check(b, upd, "put");
  if (!tx || !ti || !tu) return TTPU_VAL_ERROR;
  if (tx->ndim != 1)
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "put: operand must be 1-d, has rank %d", tx->ndim);
  if (!ttpu_hloi_same_dims(ti, tu))
    return ttpu_hlo_fail(b, TTPU_INVALID_ARGUMENT,
                         "put: updates must have the indices' shape");
  static const int64_t zero[1] = {0};
  ttpu_scatter_dims dn;
  memset(&dn, 0, sizeof dn);
  dn.n_inserted_window_dims = 1;
  dn.inserted_window_dims = zero;
  dn.n_scatter_dims_to_operand_dims = 1;
  dn.scatter_dims_to_operand_dims = zero;
  dn.index_vector_dim = ti->ndim;
  return ttpu_hlo_scatter(b, x1d, idx, upd, &dn, combine);
}
