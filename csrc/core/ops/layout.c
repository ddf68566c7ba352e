/* layout.c - ops that rearrange elements: channel shuffle, the patch
 * matrices of unfold/fold (im2col/col2im), and the index lists of a
 * matrix's triangles. */
#include "ttpu_lower.h"

/* channel_shuffle(self, groups): (N, g*k, *) -> channels regrouped as
 * (k, g), i.e. a transpose of the (g, k) split of the channel dim. */
static ttpu_status* lower_channel_shuffle(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type t = ttpu_l_type(L, x);
  int64_t g = ttpu_l_int(L, 1, 1);
  if (t.ndim < 3 || g <= 0 || t.dims[1] % g)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "channel_shuffle: number of channels must be divisible by groups");
  int64_t d[TTPU_MAX_DIMS + 1], perm[TTPU_MAX_DIMS + 1];
  d[0] = t.dims[0];
  d[1] = g;
  d[2] = t.dims[1] / g;
  for (int i = 2; i < t.ndim; ++i) d[i + 1] = t.dims[i];
  for (int i = 0; i <= t.ndim; ++i) perm[i] = i;
  perm[1] = 2;
  perm[2] = 1;
  ttpu_val r = ttpu_hlo_transpose(b, ttpu_hlo_reshape(b, x, t.ndim + 1, d), perm);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ttpu_l_out_type(L, 0)));
  return NULL;
}

/* The geometry of im2col/col2im: kernel, dilation, padding, stride (args
 * first..first+3), the padded image size and the number of patches. */
typedef struct {
  int64_t k[2], dil[2], pad[2], st[2], in[2], padded[2], out[2];
} patches;

static int patches_of(ttpu_lower* L, int first, const int64_t* image, patches* p) {
  for (int a = 0; a < 4; ++a) {
    int n = 0;
    const int64_t* v = ttpu_l_ints(L, first + a, &n);
    if (n != 2) return 0;
    int64_t* dst = a == 0 ? p->k : a == 1 ? p->dil : a == 2 ? p->pad : p->st;
    dst[0] = v[0];
    dst[1] = v[1];
  }
  for (int i = 0; i < 2; ++i) {
    p->in[i] = image[i];
    p->padded[i] = image[i] + 2 * p->pad[i];
    p->out[i] = (p->padded[i] - p->dil[i] * (p->k[i] - 1) - 1) / p->st[i] + 1;
    if (p->out[i] <= 0) return 0;
  }
  return 1;
}

/* im2col(self, kernel_size, dilation, padding, stride): (N, C, H, W) ->
 * (N, C*kh*kw, L), patch element (c, i, j) at row c*kh*kw + i*kw + j. Each
 * kernel offset is one strided slice of the zero-padded image. */
static ttpu_status* lower_im2col(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type t = ttpu_l_type(L, x);
  if (t.ndim == 3) {
    int64_t d4[4] = {1, t.dims[0], t.dims[1], t.dims[2]};
    x = ttpu_hlo_reshape(b, x, 4, d4);
    t = ttpu_l_type(L, x);
  }
  patches p;
  if (t.ndim != 4 || !patches_of(L, 1, t.dims + 2, &p))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "im2col: bad geometry");
  int64_t lo[4] = {0, 0, p.pad[0], p.pad[1]}, interior[4] = {0};
  x = ttpu_hlo_pad(b, x, ttpu_hlo_const(b, ttpu_type_make(t.dtype, 0, NULL), 0, 0), lo, lo, interior);
  ttpu_val parts[64];
  ttpu_val acc = TTPU_VAL_ERROR;
  int np = 0;
  int64_t piece[5] = {t.dims[0], t.dims[1], 1, p.out[0], p.out[1]};
  for (int64_t i = 0; i < p.k[0]; ++i)
    for (int64_t j = 0; j < p.k[1]; ++j) {
      int64_t s0[4] = {0, 0, i * p.dil[0], j * p.dil[1]};
      int64_t s1[4] = {t.dims[0], t.dims[1], s0[2] + (p.out[0] - 1) * p.st[0] + 1,
                       s0[3] + (p.out[1] - 1) * p.st[1] + 1};
      int64_t st[4] = {1, 1, p.st[0], p.st[1]};
      parts[np++] = ttpu_hlo_reshape(b, ttpu_hlo_slice(b, x, s0, s1, st), 5, piece);
      if (np == 64 || (i == p.k[0] - 1 && j == p.k[1] - 1)) {
        /* concat in chunks: the builder takes a bounded list */
        ttpu_val c = ttpu_hlo_concat(b, parts, np, 2);
        acc = acc == TTPU_VAL_ERROR ? c : ttpu_hlo_concat(b, (ttpu_val[]){acc, c}, 2, 2);
        np = 0;
      }
    }
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, acc, ot));
  return NULL;
}

/* col2im(self, output_size, kernel_size, dilation, padding, stride): the
 * adjoint of im2col, (N, C*kh*kw, L) -> (N, C, H, W), overlapping patch
 * elements summed. Each kernel offset's (N, C, oh, ow) block is spread to
 * its strided positions by an interior pad, then the blocks are added. */
static ttpu_status* lower_col2im(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  ttpu_val x = ttpu_l_tensor(L, 0);
  ttpu_type t = ttpu_l_type(L, x);
  if (t.ndim == 2) {
    int64_t d3[3] = {1, t.dims[0], t.dims[1]};
    x = ttpu_hlo_reshape(b, x, 3, d3);
    t = ttpu_l_type(L, x);
  }
  int n_out = 0;
  const int64_t* image = ttpu_l_ints(L, 1, &n_out);
  patches p;
  if (t.ndim != 3 || n_out != 2 || !patches_of(L, 2, image, &p))
    return ttpu_status_make(TTPU_INVALID_ARGUMENT, "col2im: bad geometry");
  int64_t kk = p.k[0] * p.k[1], c = t.dims[1] / kk;
  int64_t d6[6] = {t.dims[0], c, p.k[0], p.k[1], p.out[0], p.out[1]};
  ttpu_dtype md = t.dtype == TTPU_BF16 || t.dtype == TTPU_F16 ? TTPU_F32 : t.dtype;
  x = ttpu_hlo_reshape(b, ttpu_hlo_convert(b, x, md), 6, d6);
  ttpu_val zero = ttpu_hlo_const(b, ttpu_type_make(md, 0, NULL), 0, 0);
  ttpu_val sum = TTPU_VAL_ERROR;
  int64_t block[4] = {t.dims[0], c, p.out[0], p.out[1]};
  for (int64_t i = 0; i < p.k[0]; ++i)
    for (int64_t j = 0; j < p.k[1]; ++j) {
      int64_t s0[6] = {0, 0, i, j, 0, 0};
      int64_t s1[6] = {t.dims[0], c, i + 1, j + 1, p.out[0], p.out[1]};
      int64_t st[6] = {1, 1, 1, 1, 1, 1};
      ttpu_val blk = ttpu_hlo_reshape(b, ttpu_hlo_slice(b, x, s0, s1, st), 4, block);
      int64_t lo[4] = {0, 0, i * p.dil[0], j * p.dil[1]};
      int64_t in[4] = {0, 0, p.st[0] - 1, p.st[1] - 1};
      int64_t hi[4] = {0, 0, 0, 0};
      for (int a = 0; a < 2; ++a)
        hi[2 + a] = p.padded[a] - (lo[2 + a] + (p.out[a] - 1) * p.st[a] + 1);
      ttpu_val spread = ttpu_hlo_pad(b, blk, zero, lo, hi, in);
      sum = sum == TTPU_VAL_ERROR ? spread : ttpu_hlo_binary(b, TTPU_ADD, sum, spread);
    }
  int64_t s0[4] = {0, 0, p.pad[0], p.pad[1]};
  int64_t s1[4] = {t.dims[0], c, p.pad[0] + p.in[0], p.pad[1] + p.in[1]};
  int64_t st[4] = {1, 1, 1, 1};
  ttpu_val r = ttpu_hlo_slice(b, sum, s0, s1, st);
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, r, ttpu_type_make(md, ot.ndim, ot.dims)));
  return NULL;
}

/* triu_indices / tril_indices(row, col, offset=0, *, dtype, ...): the
 * (2, N) coordinates of the triangle in row-major order. Every position of
 * the row x col grid is tested; the k-th kept one goes to column k. */
static ttpu_status* tri_indices(ttpu_lower* L) {
  int upper = (int)ttpu_l_param(L);
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_type ot = ttpu_l_out_type(L, 0);
  int64_t rows = ttpu_l_int(L, 0, 0), cols = ttpu_l_int(L, 1, 0), off = ttpu_l_int(L, 2, 0);
  int64_t n = ot.dims[1], cells = rows * cols;
  if (n == 0 || cells == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ot, 0, 0));
    return NULL;
  }
  ttpu_type tc = ttpu_type_make(TTPU_I64, 1, &cells);
  ttpu_val pos = ttpu_hlo_iota(b, tc, 0);
  ttpu_val ncol = ttpu_hlo_const(b, tc, 0, cols);
  ttpu_val i = ttpu_hlo_binary(b, TTPU_DIV, pos, ncol), j = ttpu_hlo_binary(b, TTPU_REM, pos, ncol);
  ttpu_val diff = ttpu_hlo_binary(b, TTPU_SUB, j, i);
  ttpu_val keep = ttpu_hlo_compare(b, upper ? TTPU_GE : TTPU_LE, diff, ttpu_hlo_const(b, tc, 0, off));
  ttpu_val rank = ttpu_hlo_cumulative(b, ttpu_hlo_convert(b, keep, TTPU_I64), TTPU_RED_SUM, 0);
  rank = ttpu_hlo_binary(b, TTPU_SUB, rank, ttpu_hlo_const(b, tc, 0, 1));
  /* dropped positions go out of range, which the scatter ignores */
  rank = ttpu_hlo_select(b, keep, rank, ttpu_hlo_const(b, tc, 0, n));
  ttpu_type tn = ttpu_type_make(TTPU_I64, 1, &n);
  ttpu_val ri = ttpu_hlo_put(b, ttpu_hlo_const(b, tn, 0, 0), rank, i, TTPU_SCATTER_SET);
  ttpu_val rj = ttpu_hlo_put(b, ttpu_hlo_const(b, tn, 0, 0), rank, j, TTPU_SCATTER_SET);
  int64_t one_n[2] = {1, n};
  ttpu_val parts[2] = {ttpu_hlo_reshape(b, ri, 2, one_n), ttpu_hlo_reshape(b, rj, 2, one_n)};
  ttpu_l_set_out(L, 0, ttpu_hlo_concat(b, parts, 2, 0));
  return NULL;
}

const ttpu_op_def ttpu_ops_layout[] = {
    {"triu_indices", tri_indices, .param = 1, .variants = TTPU_V_OUT},
    {"tril_indices", tri_indices, .param = 0, .variants = TTPU_V_OUT},
    {"channel_shuffle", lower_channel_shuffle, .variants = TTPU_V_OUT},
    {"native_channel_shuffle", lower_channel_shuffle, .flags = 0},
    {"im2col", lower_im2col, .variants = TTPU_V_OUT, .kinds = TTPU_K_BOOL | TTPU_K_FLOAT, .kernel = "im2col_out_cpu"},
    {"col2im", lower_col2im, .variants = TTPU_V_OUT, .kinds = TTPU_K_BOOL | TTPU_K_FLOAT, .kernel = "col2im_out_cpu"},
    {0},
};
