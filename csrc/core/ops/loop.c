/* loop.c - PyTorch's scan as one stablehlo.while around a call of its
 * body (a function defined before, exec/function.c).
 *
 * The loop is a function of its own, defined for the process like a JAX
 * function (extern.c) and called through "torchtpu::extern_call", so it
 * needs no op of its own in the glue, the table or the replay of graphs.
 * Its state: the step, the carries, the stacked ys filled so far, then the
 * xs and the constants the body reads (a loop's regions see only its
 * state). A step slices x_t out of each xs, calls the body and writes y_t
 * into row t of each ys (a reversed loop counts t down: a backward pass
 * needs no flipped copies): the program holds one copy of the body whatever
 * the number of steps, which is what keeps a 12-layer model's compile near
 * a 2-layer one's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu_lower.h"

typedef struct {
  const char* body;
  const char* body_text;
  int64_t length;
  int reverse;
  int n_c, n_x, n_k, n_y;
  const ttpu_tensor* xs;
  const ttpu_tensor* ys;
  ttpu_val* args;   /* the body's arguments, n_c + n_x + n_k */
  ttpu_type* res;   /* its results, n_c + n_y */
  ttpu_val* outs;
} scan_ctx;

/* state: [step, carry (n_c), ys (n_y), xs (n_x), consts (n_k)] */
static ttpu_val scan_cond(ttpu_hlo* b, void* vctx, const ttpu_val* st) {
  const scan_ctx* c = vctx;
  return ttpu_hlo_compare(b, TTPU_LT, st[0],
                          ttpu_hlo_const_i(b, TTPU_I64, c->length));
}

static void scan_step(ttpu_hlo* b, void* vctx, const ttpu_val* st,
                      ttpu_val* next) {
  const scan_ctx* c = vctx;
  ttpu_val step = st[0];
  ttpu_val zero = ttpu_hlo_const_i(b, TTPU_I64, 0);
  ttpu_val row_at = c->reverse ? ttpu_hlo_binary(b, TTPU_SUB,
                                                 ttpu_hlo_const_i(b, TTPU_I64, c->length - 1), step)
                               : step;
  ttpu_val starts[TTPU_MAX_DIMS + 1];
  for (int d = 0; d <= TTPU_MAX_DIMS; ++d) starts[d] = d ? zero : row_at;
  const ttpu_val* carry = st + 1;
  const ttpu_val* ys = st + 1 + c->n_c;
  const ttpu_val* xs = ys + c->n_y;
  const ttpu_val* consts = xs + c->n_x;
  int a = 0;
  for (int k = 0; k < c->n_c; ++k) c->args[a++] = carry[k];
  for (int k = 0; k < c->n_x; ++k) {
    const ttpu_tensor* x = &c->xs[k];
    int64_t sizes[TTPU_MAX_DIMS];
    memcpy(sizes, x->sizes, (size_t)x->ndim * sizeof(int64_t));
    sizes[0] = 1;
    ttpu_val row = ttpu_hlo_dynamic_slice(b, xs[k], starts, sizes);
    c->args[a++] = ttpu_hlo_reshape(b, row, x->ndim - 1, x->sizes + 1);
  }
  for (int k = 0; k < c->n_k; ++k) c->args[a++] = consts[k];
  ttpu_hlo_call(b, c->body, c->body_text, c->args, a, c->res, c->n_c + c->n_y,
                c->outs);
  next[0] = ttpu_hlo_binary(b, TTPU_ADD, step, ttpu_hlo_const_i(b, TTPU_I64, 1));
  for (int k = 0; k < c->n_c; ++k) next[1 + k] = c->outs[k];
  for (int k = 0; k < c->n_y; ++k) {
    const ttpu_tensor* y = &c->ys[k];
    int64_t dims[TTPU_MAX_DIMS];
    dims[0] = 1;
    memcpy(dims + 1, y->sizes, (size_t)y->ndim * sizeof(int64_t));
    ttpu_val row = ttpu_hlo_reshape(b, c->outs[c->n_c + k], y->ndim + 1, dims);
    next[1 + c->n_c + k] = ttpu_hlo_dynamic_update_slice(b, ys[k], row, starts);
  }
  for (int k = 0; k < c->n_x + c->n_k; ++k)
    next[1 + c->n_c + c->n_y + k] = xs[k];
}

uint64_t ttpu_fnv1a(uint64_t h, const void* p, size_t n) {
  const unsigned char* c = p;
  for (size_t k = 0; k < n; ++k) h = (h ^ c[k]) * 0x100000001b3ull;
  return h;
}

uint64_t ttpu_types_hash(uint64_t h, const ttpu_tensor* t, int n) {
  h = ttpu_fnv1a(h, &n, sizeof(n));
  for (int k = 0; k < n; ++k) {
    h = ttpu_fnv1a(h, &t[k].dtype, sizeof(t[k].dtype));
    h = ttpu_fnv1a(h, &t[k].ndim, sizeof(t[k].ndim));
    h = ttpu_fnv1a(h, t[k].sizes, (size_t)t[k].ndim * sizeof(int64_t));
  }
  return h;
}

static ttpu_type type_of(const ttpu_tensor* t) {
  return ttpu_type_make(t->dtype, t->ndim, t->sizes);
}

ttpu_status* ttpu_scan_define(const char* body, int64_t length, int reverse,
                              const ttpu_tensor* carry, int n_carry,
                              const ttpu_tensor* xs, int n_xs,
                              const ttpu_tensor* consts, int n_consts,
                              const ttpu_tensor* ys, int n_ys, char* name,
                              size_t name_cap) {
  if (name && name_cap) name[0] = 0;
  const char* body_text = ttpu_extern_text(body);
  if (!body_text)
    return ttpu_status_make(TTPU_NOT_FOUND, "scan: no function @%s is defined",
                            body ? body : "(null)");
  int n_state = 1 + n_carry + n_ys + n_xs + n_consts;
  if (length < 0 || n_carry < 0 || n_xs < 0 || n_consts < 0 || n_ys < 0 ||
      n_carry + n_ys < 1 || n_state > 256)
    return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                            "scan: %d carries, %d xs, %d constants and %d ys "
                            "(at least one result; 255 values in all)",
                            n_carry, n_xs, n_consts, n_ys);
  for (int k = 0; k < n_xs; ++k)
    if (xs[k].ndim < 1 || xs[k].sizes[0] != length)
      return ttpu_status_make(TTPU_INVALID_ARGUMENT,
                              "scan: xs %d does not have %lld rows", k,
                              (long long)length);
  for (int k = 0; k < n_ys; ++k)
    if (ys[k].ndim + 1 > TTPU_MAX_DIMS)
      return ttpu_status_make(TTPU_UNIMPLEMENTED,
                              "scan: an output of %d dims stacks to more "
                              "than %d", ys[k].ndim, TTPU_MAX_DIMS);
  uint64_t h = ttpu_fnv1a(TTPU_FNV1A_SEED, body, strlen(body));
  h = ttpu_fnv1a(h, &length, sizeof(length));
  reverse = reverse != 0;
  h = ttpu_fnv1a(h, &reverse, sizeof(reverse));
  h = ttpu_types_hash(h, carry, n_carry);
  h = ttpu_types_hash(h, xs, n_xs);
  h = ttpu_types_hash(h, consts, n_consts);
  h = ttpu_types_hash(h, ys, n_ys);
  char callee[64];
  snprintf(callee, sizeof(callee), "ttpu_scan_%016llx", (unsigned long long)h);
  if (ttpu_extern_text(callee)) {
    if (name && name_cap) snprintf(name, name_cap, "%s", callee);
    return NULL;
  }

  scan_ctx c = {.body = body, .body_text = body_text, .length = length, .reverse = reverse,
                .n_c = n_carry, .n_x = n_xs, .n_k = n_consts, .n_y = n_ys,
                .xs = xs, .ys = ys};
  ttpu_hlo* b = ttpu_hlo_create();
  ttpu_val* init = malloc((size_t)n_state * sizeof(*init));
  ttpu_val* fin = malloc((size_t)n_state * sizeof(*fin));
  c.args = malloc(((size_t)n_carry + n_xs + n_consts + 1) * sizeof(ttpu_val));
  c.res = malloc(((size_t)n_carry + n_ys) * sizeof(ttpu_type));
  c.outs = malloc(((size_t)n_carry + n_ys) * sizeof(ttpu_val));
  ttpu_status* s = NULL;
  if (!b || !init || !fin || !c.args || !c.res || !c.outs) {
    s = ttpu_status_oom();
    goto done;
  }
  ttpu_hlo_set_optimize(b, 1);
  for (int k = 0; k < n_carry; ++k) c.res[k] = type_of(&carry[k]);
  for (int k = 0; k < n_ys; ++k) c.res[n_carry + k] = type_of(&ys[k]);
  init[0] = ttpu_hlo_const_i(b, TTPU_I64, 0);
  for (int k = 0; k < n_carry; ++k)
    init[1 + k] = ttpu_hlo_param(b, type_of(&carry[k]), -1);
  ttpu_val* xs_in = init + 1 + n_carry + n_ys;
  for (int k = 0; k < n_xs; ++k) xs_in[k] = ttpu_hlo_param(b, type_of(&xs[k]), -1);
  for (int k = 0; k < n_consts; ++k)
    xs_in[n_xs + k] = ttpu_hlo_param(b, type_of(&consts[k]), -1);
  for (int k = 0; k < n_ys; ++k) {
    int64_t dims[TTPU_MAX_DIMS];
    dims[0] = length;
    memcpy(dims + 1, ys[k].sizes, (size_t)ys[k].ndim * sizeof(int64_t));
    init[1 + n_carry + k] =
        ttpu_hlo_const(b, ttpu_type_make(ys[k].dtype, ys[k].ndim + 1, dims), 0, 0);
  }
  ttpu_hlo_while(b, init, n_state, scan_cond, scan_step, &c, fin);
  ttpu_hlo_return(b, fin + 1, n_carry + n_ys);
  s = ttpu_extern_define_module(b, callee, name, name_cap);
done:
  if (s) s = ttpu_status_annotate(s, "defining a scan over @%s", body);
  ttpu_hlo_free(b);
  free(init);
  free(fin);
  free(c.args);
  free(c.res);
  free(c.outs);
  return s;
}
