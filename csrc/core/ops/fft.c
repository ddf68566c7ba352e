/* fft.c - the FFT family (_fft_r2c, _fft_c2r, _fft_c2c) on stablehlo.fft,
 * which transforms the innermost 1-3 dims: the requested dims are moved
 * there (in their order), transformed in chunks of at most three, and
 * moved back. PyTorch has already padded/trimmed the signal and wrapped
 * the dims; `normalization` is 0 (none), 1 (1/sqrt(n)) or 2 (1/n) with n
 * the product of the transformed (real-signal) sizes. XLA scales its
 * inverse transforms by 1/n; that is undone or kept to give the mode. */
#include <math.h>

#include "elementwise.h"

/* x transformed over dims d[0..n) (each of x's dims at most once) with
 * type `type` on the chunk holding the last dim; any other dims go
 * through the complex transform of the same direction first. `last_len`
 * is the real length of the last dim for RFFT/IRFFT. */
static ttpu_val transform(ttpu_hlo* b, ttpu_val x, const int64_t* d, int n,
                          ttpu_fft_type last_type, int64_t last_len) {
  int inverse = last_type == TTPU_FFT_IFFT || last_type == TTPU_FFT_IRFFT;
  /* The chunks: the last (up to 3 dims, containing d[n-1]) is done last
   * for c2r (the complex passes run on the Hermitian half first) and
   * first for r2c (the real input becomes complex there). */
  int last_k = n < 3 ? n : 3;
  int first = last_type == TTPU_FFT_RFFT;
  for (int step = 0; step < 2; ++step) {
    int do_last = (step == 0) == first;
    int lo, hi; /* the chunk(s) of d handled in this step: d[lo..hi) */
    if (do_last) {
      lo = n - last_k;
      hi = n;
    } else {
      lo = 0;
      hi = n - last_k;
    }
    for (int c0 = lo; c0 < hi;) {
      int k = hi - c0 < 3 ? hi - c0 : 3;
      const ttpu_type* tp = ttpu_hlo_type(b, x);
      if (!tp) return TTPU_VAL_ERROR;
      ttpu_type t = *tp;
      /* perm: other dims in order, then d[c0..c0+k) */
      int64_t perm[TTPU_MAX_DIMS], inv[TTPU_MAX_DIMS];
      int in_chunk[TTPU_MAX_DIMS] = {0}, m = 0;
      for (int j = 0; j < k; ++j) in_chunk[d[c0 + j]] = 1;
      for (int i = 0; i < t.ndim; ++i)
        if (!in_chunk[i]) perm[m++] = i;
      for (int j = 0; j < k; ++j) perm[m++] = d[c0 + j];
      for (int i = 0; i < t.ndim; ++i) inv[perm[i]] = i;
      ttpu_val v = ttpu_hlo_transpose(b, x, perm);
      int64_t len[3];
      for (int j = 0; j < k; ++j) len[j] = t.dims[d[c0 + j]];
      ttpu_fft_type ft = inverse ? TTPU_FFT_IFFT : TTPU_FFT_FFT;
      if (do_last && last_type != TTPU_FFT_FFT && last_type != TTPU_FFT_IFFT) {
        ft = last_type;
        len[k - 1] = last_len;
      }
      if (ft == TTPU_FFT_IRFFT) {
        /* The imaginary parts of the zero and Nyquist terms do not exist
         * in a real signal's spectrum: the CPU's c2r ignores them; so
         * does this, whatever the plugin would make of them. */
        const ttpu_type* vt = ttpu_hlo_type(b, v);
        if (!vt) return TTPU_VAL_ERROR;
        ttpu_type tv = *vt;
        int64_t h = tv.dims[tv.ndim - 1];
        ttpu_type it = tv;
        it.dtype = TTPU_I64;
        ttpu_val pos = ttpu_hlo_iota(b, it, tv.ndim - 1);
        ttpu_val edge = ttpu_ew_cmpk(b, TTPU_EQ, pos, 0);
        if (last_len % 2 == 0)
          edge = ttpu_ew_or(b, edge, ttpu_ew_cmpk(b, TTPU_EQ, pos, (double)(h - 1)));
        ttpu_val im = ttpu_hlo_imag(b, v);
        im = ttpu_hlo_select(b, edge, ttpu_ew_k(b, im, 0), im);
        v = ttpu_hlo_complex(b, ttpu_hlo_real(b, v), im);
      }
      v = ttpu_hlo_fft(b, v, ft, len, k);
      x = ttpu_hlo_transpose(b, v, inv);
      c0 += k;
    }
  }
  return x;
}

/* The scale turning XLA's result into the normalization's: XLA's inverse
 * transforms already divide by n. */
static ttpu_val normalize(ttpu_hlo* b, ttpu_val x, int inverse, int64_t mode,
                          double n) {
  double want = mode == 1 ? 1 / sqrt(n) : mode == 2 ? 1 / n : 1;
  double f = inverse ? want * n : want;
  if (f == 1 || n == 0) return x;
  return ttpu_ew_mul(b, x, ttpu_ew_k(b, x, f));
}

/* Wrapped dims of arg 1, checked against rank nd. */
static int dims_of(ttpu_lower* L, int nd, int64_t* d) {
  int n = 0;
  const int64_t* dims = ttpu_l_ints(L, 1, &n);
  if (n < 1 || n > nd) {
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT,
                  "FFT dims must be 1 to %d distinct dims", nd);
    return 0;
  }
  int seen[TTPU_MAX_DIMS] = {0};
  for (int i = 0; i < n; ++i) {
    d[i] = ttpu_l_dim(L, dims[i], nd);
    if (d[i] < 0 || d[i] >= nd || seen[d[i]]++) {
      ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INVALID_ARGUMENT,
                    "FFT dims must be distinct");
      return 0;
    }
  }
  return n;
}

/* bf16/f16 have no FFT on the CPU either (the meta kernel or the glue
 * reject them first; this keeps the engine's own answer the same). */
static int fft_dtype_ok(ttpu_lower* L, ttpu_dtype dt) {
  ttpu_dtype r = ttpu_dtype_real(dt);
  if (r == TTPU_F32 || r == TTPU_F64) return 1;
  ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_UNIMPLEMENTED,
                "Unsupported dtype %s", ttpu_dtype_torch_title(dt));
  return 0;
}

static int empty_out(ttpu_lower* L) {
  ttpu_type ot = ttpu_l_out_type(L, 0);
  if (ttpu_type_numel(&ot) != 0) return 0;
  ttpu_l_set_out(L, 0, ttpu_hlo_const(ttpu_l_hlo(L), ot, 0, 0));
  return 1;
}

/* What every FFT lowering reads first: output type, input (arg 0), the
 * wrapped dims (arg 1) and the product of their input sizes. 0 when the
 * lowering is already done (an empty result) or failed. */
typedef struct {
  ttpu_type ot, tx;
  ttpu_val x;
  int64_t d[TTPU_MAX_DIMS];
  int n;
  double count;
} fft_args;

static int fft_begin(ttpu_lower* L, fft_args* a) {
  a->ot = ttpu_l_out_type(L, 0);
  a->x = ttpu_l_tensor(L, 0);
  a->tx = ttpu_l_type(L, a->x);
  if (!fft_dtype_ok(L, a->tx.dtype) || empty_out(L)) return 0;
  a->n = dims_of(L, a->tx.ndim, a->d);
  a->count = 1;
  for (int i = 0; i < a->n; ++i) a->count *= (double)a->tx.dims[a->d[i]];
  return a->n;
}

/* _fft_r2c(self, dim, normalization, onesided) */
static ttpu_status* lower_r2c(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  fft_args a;
  if (!fft_begin(L, &a)) return NULL;
  ttpu_val x = ttpu_hlo_convert(b, a.x, ttpu_dtype_real(a.ot.dtype)), r;
  if (ttpu_l_bool(L, 3, 1)) {
    r = transform(b, x, a.d, a.n, TTPU_FFT_RFFT, a.tx.dims[a.d[a.n - 1]]);
  } else { /* the full spectrum: a complex transform of the real signal */
    r = transform(b, ttpu_hlo_convert(b, x, a.ot.dtype), a.d, a.n,
                  TTPU_FFT_FFT, 0);
  }
  ttpu_l_set_out(L, 0, normalize(b, r, 0, ttpu_l_int(L, 2, 0), a.count));
  return NULL;
}

/* _fft_c2r(self, dim, normalization, last_dim_size) */
static ttpu_status* lower_c2r(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  fft_args a;
  if (!fft_begin(L, &a)) return NULL;
  int64_t last = ttpu_l_int(L, 3, 0), half = a.tx.dims[a.d[a.n - 1]];
  double count = half ? a.count / (double)half * (double)last : 0;
  ttpu_val r = ttpu_hlo_convert(b, a.x, ttpu_dtype_complex_of(a.ot.dtype));
  /* only the chunk with the last dim may be IRFFT: the other dims go
   * through complex transforms first, then the last dim alone */
  if (a.n > 1) r = transform(b, r, a.d, a.n - 1, TTPU_FFT_IFFT, 0);
  r = transform(b, r, a.d + a.n - 1, 1, TTPU_FFT_IRFFT, last);
  ttpu_l_set_out(L, 0, normalize(b, r, 1, ttpu_l_int(L, 2, 0), count));
  return NULL;
}

/* _fft_c2c(self, dim, normalization, forward) */
static ttpu_status* lower_c2c(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  fft_args a;
  if (!fft_begin(L, &a)) return NULL;
  int forward = ttpu_l_bool(L, 3, 1);
  ttpu_val r = transform(b, ttpu_hlo_convert(b, a.x, a.ot.dtype), a.d, a.n,
                         forward ? TTPU_FFT_FFT : TTPU_FFT_IFFT, 0);
  ttpu_l_set_out(L, 0, normalize(b, r, !forward, ttpu_l_int(L, 2, 0), a.count));
  return NULL;
}

const ttpu_op_def ttpu_ops_fft[] = {
    {"_fft_r2c", lower_r2c, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {"_fft_c2r", lower_c2r, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {"_fft_c2c", lower_c2c, .flags = TTPU_OP_COMPLEX_AS_IS, .variants = TTPU_V_OUT},
    {0},
};
