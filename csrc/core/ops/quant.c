/* quant.c - weight-only quantized matmuls: int8 weights with per-row
 * scales (_weight_int8pack_mm) and 4-bit weights with groupwise scales and
 * zeros, in both of PyTorch's packings:
 *
 *  - the CPU's (_convert_weight_to_int4pack_for_cpu,
 *    _weight_int4pack_mm_for_cpu): uint8 [N, K/2], its bytes laid out as
 *    the CPU kernel of the host lays them out. That kernel packs rows in
 *    blocks of BLOCK_N (64 under AVX512, 32 under AVX2, the vector width
 *    times 4 elsewhere), each block k-major; within a block, a byte holds
 *    rows (2j, 2j+1) (low, high nibble), except that a full block under
 *    AVX2/AVX512 pairs row j with row j + BLOCK_N/2. The glue appends the
 *    host's layout as one more int argument (BLOCK_N * 2 + split), so a
 *    weight packed on the CPU and moved to the tpu gives the CPU's
 *    results, and the packing is part of the program's signature.
 *  - the one CUDA's tinygemm kernels take (_convert_weight_to_int4pack,
 *    _weight_int4pack_mm), from torchao's uint8 [N, K/2] (high nibble:
 *    even k). Its int32 [N/8, K/(tiles*16), 32, tiles/2] result is the
 *    engine's own layout: the input's bytes, four to an int32 (little
 *    end first), in row-major order. Only the tpu's _weight_int4pack_mm
 *    reads it.
 *
 * The math is the CPU kernels': a nibble q dequantizes to
 * (q - 8) * scale + zero in float32, the products accumulate in float32
 * and the result is rounded to the activation's dtype once; int8 weights
 * are multiplied as floats and the float32 sum is scaled by the row's
 * scale. The contractions ask for full float32 (HIGHEST), as the CPU
 * computes (in float32 operands: the XLA CPU plugin does not run a bf16 x
 * bf16 -> f32 dot, and the products are exact in float32 anyway). */
#include "elementwise.h"

static ttpu_val bin(ttpu_hlo* b, ttpu_binop op, ttpu_val x, ttpu_val y) {
  return ttpu_hlo_binary(b, op, x, y);
}

static ttpu_val reshape(ttpu_hlo* b, ttpu_val x, int n, const int64_t* dims) {
  return ttpu_hlo_reshape(b, x, n, dims);
}

/* Rows [r0, r1) of the 2-d value x (cols wide). */
static ttpu_val rows(ttpu_hlo* b, ttpu_val x, int64_t r0, int64_t r1, int64_t cols) {
  int64_t start[2] = {r0, 0}, limit[2] = {r1, cols}, stride[2] = {1, 1};
  return ttpu_hlo_slice(b, x, start, limit, stride);
}

/* x[..., i] (i = 0, 1) of a value whose dim `d` has size 2, dropped. */
static ttpu_val pick(ttpu_hlo* b, ttpu_val x, ttpu_type t, int d, int64_t i) {
  int64_t start[TTPU_MAX_DIMS] = {0}, limit[TTPU_MAX_DIMS], stride[TTPU_MAX_DIMS];
  int64_t dims[TTPU_MAX_DIMS];
  int n = 0;
  for (int k = 0; k < t.ndim; ++k) {
    limit[k] = t.dims[k];
    stride[k] = 1;
    if (k != d) dims[n++] = t.dims[k];
  }
  start[d] = i;
  limit[d] = i + 1;
  return reshape(b, ttpu_hlo_slice(b, x, start, limit, stride), n, dims);
}

/* --------------------------------------------------- the CPU's int4 layout */

/* The host's packing: rows in blocks of `block`; `split` pairs row j with
 * row j + block/2 in full blocks. Decoded from the glue's layout argument. */
typedef struct {
  int64_t block;
  int split;
} int4_layout;

static int read_layout(ttpu_lower* L, int arg, int4_layout* out) {
  int64_t code = ttpu_l_int(L, arg, -1);
  out->block = code / 2;
  out->split = (int)(code & 1);
  if (out->block < 16 || out->block % 16) {
    ttpu_hlo_fail(ttpu_l_hlo(L), TTPU_INTERNAL,
                  "int4 packing: no host layout given (code %lld)", (long long)code);
    return 0;
  }
  return 1;
}

/* Bytes [n, k, w/2] of blocks [n, k, w] of nibbles (int32): byte j holds
 * (2j, 2j+1), or (j, j + w/2) when split. Out-of-range values keep the
 * CPU's truncation: ((hi << 4) | lo) & 0xff. */
static ttpu_val pack_blocks(ttpu_hlo* b, ttpu_val w, int64_t n, int64_t k, int64_t w_, int split) {
  int64_t d4[4] = {n, k, split ? 2 : w_ / 2, split ? w_ / 2 : 2};
  ttpu_type t = {TTPU_I32, 4, {n, k, d4[2], d4[3]}};
  ttpu_val v = reshape(b, w, 4, d4);
  int d = split ? 2 : 3;
  ttpu_val lo = pick(b, v, t, d, 0), hi = pick(b, v, t, d, 1);
  ttpu_val byte = bin(b, TTPU_OR, bin(b, TTPU_SHL, hi, ttpu_ew_k(b, hi, 4)), lo);
  byte = bin(b, TTPU_AND, byte, ttpu_ew_k(b, byte, 255));
  return ttpu_hlo_convert(b, byte, TTPU_U8);
}

/* The nibbles [n, k, w] (int32, 0..15) of bytes [n, k, w/2]: the inverse
 * of pack_blocks. */
static ttpu_val unpack_blocks(ttpu_hlo* b, ttpu_val bytes, int64_t n, int64_t k, int64_t w_, int split) {
  ttpu_val v = ttpu_hlo_convert(b, bytes, TTPU_I32);
  ttpu_val lo = bin(b, TTPU_AND, v, ttpu_ew_k(b, v, 15));
  ttpu_val hi = bin(b, TTPU_SHR_L, v, ttpu_ew_k(b, v, 4));
  int64_t d4[4] = {n, k, split ? 1 : w_ / 2, split ? w_ / 2 : 1};
  ttpu_val parts[2] = {reshape(b, lo, 4, d4), reshape(b, hi, 4, d4)};
  ttpu_val both = ttpu_hlo_concat(b, parts, 2, split ? 2 : 3);
  int64_t d3[3] = {n, k, w_};
  return reshape(b, both, 3, d3);
}

/* The rows [r0, r0 + nb * w) of the [N, K] weight, as blocks of w rows:
 * packed (to_bytes) into rows of [N, K/2] bytes, or unpacked from them.
 * A block is k-major: [w, K] <-> [K, w] bytes in order. */
static ttpu_val convert_span(ttpu_hlo* b, ttpu_val x, int to_bytes, int64_t nb,
                             int64_t w, int64_t K, int split) {
  int64_t perm[3] = {0, 2, 1};
  if (to_bytes) {
    int64_t d3[3] = {nb, w, K};
    ttpu_val kmaj = ttpu_hlo_transpose(b, reshape(b, x, 3, d3), perm);
    ttpu_val bytes = pack_blocks(b, kmaj, nb, K, w, split);
    int64_t d2[2] = {nb * w, K / 2};
    return reshape(b, bytes, 2, d2);
  }
  int64_t d3[3] = {nb, K, w / 2};
  ttpu_val q = unpack_blocks(b, reshape(b, x, 3, d3), nb, K, w, split);
  int64_t d2[2] = {nb * w, K};
  return reshape(b, ttpu_hlo_transpose(b, q, perm), 2, d2);
}

/* The whole weight: full blocks in the host's layout, a last partial
 * block (N % block rows, a multiple of 16) always unsplit. */
static ttpu_val convert_cpu_layout(ttpu_hlo* b, ttpu_val x, int to_bytes, int64_t N,
                                   int64_t K, int4_layout lay) {
  int64_t full = N / lay.block, tail = N % lay.block, cols = to_bytes ? K : K / 2;
  ttpu_val parts[2];
  int n = 0;
  if (full)
    parts[n++] = convert_span(b, full * lay.block == N ? x : rows(b, x, 0, full * lay.block, cols),
                              to_bytes, full, lay.block, K, lay.split);
  if (tail)
    parts[n++] = convert_span(b, full ? rows(b, x, full * lay.block, N, cols) : x,
                              to_bytes, 1, tail, K, 0);
  return n == 1 ? parts[0] : ttpu_hlo_concat(b, parts, n, 0);
}

/* _convert_weight_to_int4pack_for_cpu(Tensor self, int innerKTiles,
 * [layout]) -> uint8 [N, K/2]. */
static ttpu_status* lower_int4pack_for_cpu(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int4_layout lay;
  if (!read_layout(L, 2, &lay)) return NULL;
  ttpu_val w = ttpu_l_tensor(L, 0);
  ttpu_type tw = ttpu_l_type(L, w);
  if (tw.dims[0] == 0 || tw.dims[1] == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, ttpu_l_out_type(L, 0), 0, 0));
    return NULL;
  }
  ttpu_l_set_out(L, 0, convert_cpu_layout(b, w, 1, tw.dims[0], tw.dims[1], lay));
  return NULL;
}

/* --------------------------------------------------- the tpu's own layout */

/* _convert_weight_to_int4pack(Tensor self, int innerKTiles): uint8
 * [N, K/2] -> int32 of the meta kernel's shape, four bytes to an int32. */
static ttpu_status* lower_int4pack(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val w = ttpu_l_tensor(L, 0);
  ttpu_type tw = ttpu_l_type(L, w), out = ttpu_l_out_type(L, 0);
  int64_t n_words = tw.dims[0] * tw.dims[1] / 4;
  if (n_words == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, out, 0, 0));
    return NULL;
  }
  int64_t d2[2] = {n_words, 4};
  ttpu_type t4 = {TTPU_U32, 2, {n_words, 4}};
  ttpu_val v = ttpu_hlo_convert(b, reshape(b, w, 2, d2), TTPU_U32);
  ttpu_val word = TTPU_VAL_ERROR;
  for (int i = 0; i < 4; ++i) {
    ttpu_val byte = pick(b, v, t4, 1, i);
    if (i) byte = bin(b, TTPU_SHL, byte, ttpu_ew_k(b, byte, 8 * i));
    word = i ? bin(b, TTPU_OR, word, byte) : byte;
  }
  ttpu_type ti = {TTPU_I32, 1, {n_words}};
  ttpu_l_set_out(L, 0, ttpu_l_reshape_to(b, ttpu_hlo_bitcast(b, word, ti), out));
  return NULL;
}

/* The nibbles [N, K] of the tpu's int4pack: byte j of row n holds k = 2j
 * (high) and 2j + 1 (low). */
static ttpu_val unpack_tpu_layout(ttpu_hlo* b, ttpu_val w, int64_t N, int64_t K) {
  int64_t n_words = N * K / 8;
  int64_t d1[1] = {n_words};
  ttpu_type tu = {TTPU_U32, 1, {n_words}};
  ttpu_val word = ttpu_hlo_bitcast(b, reshape(b, w, 1, d1), tu);
  ttpu_type t8 = {TTPU_U32, 2, {n_words, 8}};
  int64_t map[1] = {0};
  ttpu_val wb = ttpu_hlo_broadcast_in_dim(b, word, t8, map);
  /* nibble i of a word is k = 8w + i: byte i/2, high nibble first */
  ttpu_val i = ttpu_hlo_iota(b, t8, 1);
  ttpu_val half = bin(b, TTPU_SHR_L, i, ttpu_ew_k(b, i, 1));
  ttpu_val even = bin(b, TTPU_XOR, bin(b, TTPU_AND, i, ttpu_ew_k(b, i, 1)), ttpu_ew_k(b, i, 1));
  ttpu_val shift = bin(b, TTPU_OR, bin(b, TTPU_SHL, half, ttpu_ew_k(b, i, 3)),
                       bin(b, TTPU_SHL, even, ttpu_ew_k(b, i, 2)));
  ttpu_val q = bin(b, TTPU_AND, bin(b, TTPU_SHR_L, wb, shift), ttpu_ew_k(b, wb, 15));
  int64_t d2[2] = {N, K};
  return reshape(b, ttpu_hlo_convert(b, q, TTPU_I32), 2, d2);
}

/* ----------------------------------------------------------- the matmuls */

/* x [M, K] times the dequantized weight of nibbles q [N, K] (int32 0..15)
 * with scales and zeros sz [K/G, N, 2] of x's dtype: [M, N] in float32. */
static ttpu_val int4_matmul(ttpu_hlo* b, ttpu_val x, ttpu_val q, ttpu_val sz,
                            int64_t N, int64_t K, int64_t G) {
  int64_t perm[2] = {1, 0};
  ttpu_val qt = ttpu_hlo_transpose(b, q, perm); /* [K, N] */
  ttpu_val qf = ttpu_hlo_convert(b, bin(b, TTPU_SUB, qt, ttpu_ew_k(b, qt, 8)), TTPU_F32);
  ttpu_type ts = {TTPU_F32, 3, {K / G, N, 2}};
  ttpu_val s = ttpu_hlo_convert(b, sz, TTPU_F32);
  ttpu_type tg = {TTPU_F32, 3, {K / G, G, N}};
  int64_t map[2] = {0, 2}, dkn[2] = {K, N};
  ttpu_val scale = reshape(b, ttpu_hlo_broadcast_in_dim(b, pick(b, s, ts, 2, 0), tg, map), 2, dkn);
  ttpu_val zero = reshape(b, ttpu_hlo_broadcast_in_dim(b, pick(b, s, ts, 2, 1), tg, map), 2, dkn);
  ttpu_val wt = bin(b, TTPU_ADD, bin(b, TTPU_MUL, qf, scale), zero);
  int64_t lc = 1, rc = 0;
  return ttpu_hlo_dot_general(b, ttpu_hlo_convert(b, x, TTPU_F32), wt, NULL, NULL, 0,
                              &lc, &rc, 1, TTPU_F32, TTPU_PREC_HIGHEST);
}

/* _weight_int4pack_mm(_for_cpu)(Tensor self, Tensor mat2, int qGroupSize,
 * Tensor qScaleAndZeros[, layout]); param 1: the CPU's packing. */
static ttpu_status* lower_int4pack_mm(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  int cpu = (int)ttpu_l_param(L);
  int4_layout lay = {0, 0};
  if (cpu && !read_layout(L, 4, &lay)) return NULL;
  ttpu_val x = ttpu_l_tensor(L, 0), w = ttpu_l_tensor(L, 1), sz = ttpu_l_tensor(L, 3);
  ttpu_type tx = ttpu_l_type(L, x), out = ttpu_l_out_type(L, 0);
  int64_t G = ttpu_l_int(L, 2, 32);
  int64_t N = out.dims[1], K = tx.dims[1];
  if (out.dims[0] == 0 || N == 0 || K == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, out, 0, 0));
    return NULL;
  }
  ttpu_val q = cpu ? convert_cpu_layout(b, w, 0, N, K, lay) : unpack_tpu_layout(b, w, N, K);
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, int4_matmul(b, x, q, sz, N, K, G), out.dtype));
  return NULL;
}

/* _weight_int8pack_mm(Tensor self, Tensor mat2, Tensor scales):
 * (x @ w.T) * scales, summed in float32. */
static ttpu_status* lower_int8pack_mm(ttpu_lower* L) {
  ttpu_hlo* b = ttpu_l_hlo(L);
  ttpu_val x = ttpu_l_tensor(L, 0), w = ttpu_l_tensor(L, 1), s = ttpu_l_tensor(L, 2);
  ttpu_type out = ttpu_l_out_type(L, 0);
  if (out.dims[0] == 0 || out.dims[1] == 0) {
    ttpu_l_set_out(L, 0, ttpu_hlo_const(b, out, 0, 0));
    return NULL;
  }
  int64_t lc = 1, rc = 1;
  ttpu_val y = ttpu_hlo_dot_general(b, ttpu_hlo_convert(b, x, TTPU_F32),
                                    ttpu_hlo_convert(b, w, TTPU_F32), NULL, NULL, 0, &lc, &rc,
                                    1, TTPU_F32, TTPU_PREC_HIGHEST);
  ttpu_type ty = {TTPU_F32, 2, {out.dims[0], out.dims[1]}};
  int64_t map[1] = {1};
  ttpu_val sf = ttpu_hlo_broadcast_in_dim(b, ttpu_hlo_convert(b, s, TTPU_F32), ty, map);
  ttpu_l_set_out(L, 0, ttpu_hlo_convert(b, bin(b, TTPU_MUL, y, sf), out.dtype));
  return NULL;
}

const ttpu_op_def ttpu_ops_quant[] = {
    {"_convert_weight_to_int4pack_for_cpu", lower_int4pack_for_cpu, .param = 0},
    {"_convert_weight_to_int4pack", lower_int4pack, .param = 0},
    {"_weight_int4pack_mm_for_cpu", lower_int4pack_mm, .param = 1},
    {"_weight_int4pack_mm", lower_int4pack_mm, .param = 0},
    {"_weight_int8pack_mm", lower_int8pack_mm, .param = 0},
    {0},
};
