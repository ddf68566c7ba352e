/* common.c - helpers shared by the op families. */
#include "ttpu_lower.h"

void ttpu_l_broadcast_pair(ttpu_lower* L, ttpu_val* a, ttpu_val* b,
                           ttpu_dtype dt) {
  ttpu_hlo* h = ttpu_l_hlo(L);
  ttpu_type ta = ttpu_l_type(L, *a), tb = ttpu_l_type(L, *b);
  int nd = ta.ndim > tb.ndim ? ta.ndim : tb.ndim;
  int64_t dims[TTPU_MAX_DIMS];
  for (int i = 0; i < nd; ++i) {
    int ia = i - (nd - ta.ndim), ib = i - (nd - tb.ndim);
    int64_t da = ia >= 0 ? ta.dims[ia] : 1, db = ib >= 0 ? tb.dims[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      ttpu_hlo_fail(h, TTPU_INVALID_ARGUMENT,
                    "The size of tensor a (%lld) must match the size of "
                    "tensor b (%lld) at non-singleton dimension %d",
                    (long long)da, (long long)db, i);
      return;
    }
    dims[i] = da == 1 ? db : da;
  }
  *a = ttpu_hlo_broadcast_to(h, ttpu_hlo_convert(h, *a, dt), nd, dims);
  *b = ttpu_hlo_broadcast_to(h, ttpu_hlo_convert(h, *b, dt), nd, dims);
}

int64_t ttpu_l_dim(ttpu_lower* L, int64_t dim, int ndim) {
  int64_t r = ndim > 0 ? ndim : 1;
  if (dim < -r || dim >= r) {
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INDEX_ERROR,
                  "Dimension out of range (expected to be in range of [%lld, "
                  "%lld], but got %lld)",
                  (long long)-r, (long long)(r - 1), (long long)dim);
    return 0;
  }
  return dim < 0 ? dim + r : dim;
}
