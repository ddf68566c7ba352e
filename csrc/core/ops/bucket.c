/* bucket.c - how each op treats a dimension that holds a bucket of sizes
 * (docs/design/shapes.md): the ops whose programs may serve every size in
 * a bucket, and the value a dim's padding must hold for each of them.
 * An op not listed here runs its exact program for each size. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ttpu_lower.h"

typedef struct {
  const char* name;
  int rule;
} rule_def;

/* Each name stands for its in-place and out= overloads too. */
static const rule_def kRules[] = {
    /* Elementwise and broadcasting: an output element depends on the
     * inputs' elements at its own index, so padding only meets padding. */
    {"add.Tensor", TTPU_B_ELEMENTWISE},
    {"add.Scalar", TTPU_B_ELEMENTWISE},
    {"sub.Tensor", TTPU_B_ELEMENTWISE},
    {"sub.Scalar", TTPU_B_ELEMENTWISE},
    {"rsub.Tensor", TTPU_B_ELEMENTWISE},
    {"rsub.Scalar", TTPU_B_ELEMENTWISE},
    {"mul.Tensor", TTPU_B_ELEMENTWISE},
    {"mul.Scalar", TTPU_B_ELEMENTWISE},
    {"div.Tensor", TTPU_B_ELEMENTWISE},
    {"div.Scalar", TTPU_B_ELEMENTWISE},
    {"div.Tensor_mode", TTPU_B_ELEMENTWISE},
    {"pow.Tensor_Scalar", TTPU_B_ELEMENTWISE},
    {"pow.Tensor_Tensor", TTPU_B_ELEMENTWISE},
    {"maximum", TTPU_B_ELEMENTWISE},
    {"minimum", TTPU_B_ELEMENTWISE},
    {"eq.Tensor", TTPU_B_ELEMENTWISE},
    {"eq.Scalar", TTPU_B_ELEMENTWISE},
    {"ne.Tensor", TTPU_B_ELEMENTWISE},
    {"ne.Scalar", TTPU_B_ELEMENTWISE},
    {"lt.Tensor", TTPU_B_ELEMENTWISE},
    {"lt.Scalar", TTPU_B_ELEMENTWISE},
    {"le.Tensor", TTPU_B_ELEMENTWISE},
    {"le.Scalar", TTPU_B_ELEMENTWISE},
    {"gt.Tensor", TTPU_B_ELEMENTWISE},
    {"gt.Scalar", TTPU_B_ELEMENTWISE},
    {"ge.Tensor", TTPU_B_ELEMENTWISE},
    {"ge.Scalar", TTPU_B_ELEMENTWISE},
    {"where.self", TTPU_B_ELEMENTWISE},
    {"masked_fill.Scalar", TTPU_B_ELEMENTWISE},
    {"masked_fill.Tensor", TTPU_B_ELEMENTWISE},
    {"neg", TTPU_B_ELEMENTWISE},
    {"exp", TTPU_B_ELEMENTWISE},
    {"log", TTPU_B_ELEMENTWISE},
    {"rsqrt", TTPU_B_ELEMENTWISE},
    {"sqrt", TTPU_B_ELEMENTWISE},
    {"sin", TTPU_B_ELEMENTWISE},
    {"cos", TTPU_B_ELEMENTWISE},
    {"tanh", TTPU_B_ELEMENTWISE},
    {"sigmoid", TTPU_B_ELEMENTWISE},
    {"silu", TTPU_B_ELEMENTWISE},
    {"clone", TTPU_B_ELEMENTWISE},
    {"bitwise_and.Tensor", TTPU_B_ELEMENTWISE},
    {"bitwise_and.Scalar", TTPU_B_ELEMENTWISE},
    {"bitwise_or.Tensor", TTPU_B_ELEMENTWISE},
    {"bitwise_or.Scalar", TTPU_B_ELEMENTWISE},
    {"bitwise_xor.Tensor", TTPU_B_ELEMENTWISE},
    {"bitwise_xor.Scalar", TTPU_B_ELEMENTWISE},
    {"bitwise_not", TTPU_B_ELEMENTWISE},
    {"logical_and", TTPU_B_ELEMENTWISE},
    {"logical_or", TTPU_B_ELEMENTWISE},
    {"logical_xor", TTPU_B_ELEMENTWISE},
    {"logical_not", TTPU_B_ELEMENTWISE},
    {"gelu", TTPU_B_ELEMENTWISE},
    {"relu", TTPU_B_ELEMENTWISE},
    {"abs", TTPU_B_ELEMENTWISE},
    {"clamp", TTPU_B_ELEMENTWISE},
    {"clamp_min", TTPU_B_ELEMENTWISE},
    {"clamp_max", TTPU_B_ELEMENTWISE},
    {"reciprocal", TTPU_B_ELEMENTWISE},
    {"erf", TTPU_B_ELEMENTWISE},
    {"bitwise_and.Tensor", TTPU_B_ELEMENTWISE},
    {"bitwise_or.Tensor", TTPU_B_ELEMENTWISE},
    {"bitwise_not", TTPU_B_ELEMENTWISE},
    {"logical_and", TTPU_B_ELEMENTWISE},
    {"logical_or", TTPU_B_ELEMENTWISE},
    {"logical_not", TTPU_B_ELEMENTWISE},
    {"copy_", TTPU_B_ELEMENTWISE},
    {"clone", TTPU_B_ELEMENTWISE},
    {"_to_copy", TTPU_B_ELEMENTWISE},
    {"triu", TTPU_B_ELEMENTWISE},
    {"tril", TTPU_B_ELEMENTWISE},
    {"isneginf", TTPU_B_ELEMENTWISE},
    {"isposinf", TTPU_B_ELEMENTWISE},
    {"isnan", TTPU_B_ELEMENTWISE},
    {"isinf", TTPU_B_ELEMENTWISE},
    {"isfinite", TTPU_B_ELEMENTWISE},
    {"signbit", TTPU_B_ELEMENTWISE},
    {"sign", TTPU_B_ELEMENTWISE},
    {"nan_to_num", TTPU_B_ELEMENTWISE},
    {"floor", TTPU_B_ELEMENTWISE},
    {"ceil", TTPU_B_ELEMENTWISE},
    {"round", TTPU_B_ELEMENTWISE},
    {"trunc", TTPU_B_ELEMENTWISE},
    {"frac", TTPU_B_ELEMENTWISE},
    {"log1p", TTPU_B_ELEMENTWISE},
    {"expm1", TTPU_B_ELEMENTWISE},
    {"log2", TTPU_B_ELEMENTWISE},
    {"log10", TTPU_B_ELEMENTWISE},
    {"exp2", TTPU_B_ELEMENTWISE},
    {"sinh", TTPU_B_ELEMENTWISE},
    {"cosh", TTPU_B_ELEMENTWISE},
    {"tan", TTPU_B_ELEMENTWISE},
    {"atan", TTPU_B_ELEMENTWISE},
    {"erfc", TTPU_B_ELEMENTWISE},
    {"square", TTPU_B_ELEMENTWISE},
    {"lerp.Scalar", TTPU_B_ELEMENTWISE},
    {"lerp.Tensor", TTPU_B_ELEMENTWISE},
    {"addcmul", TTPU_B_ELEMENTWISE},
    {"addcdiv", TTPU_B_ELEMENTWISE},
    {"hardtanh", TTPU_B_ELEMENTWISE},
    {"leaky_relu", TTPU_B_ELEMENTWISE},
    {"elu", TTPU_B_ELEMENTWISE},
    {"softplus", TTPU_B_ELEMENTWISE},
    {"mish", TTPU_B_ELEMENTWISE},
    {"hardswish", TTPU_B_ELEMENTWISE},
    {"hardsigmoid", TTPU_B_ELEMENTWISE},
    {"fmod.Scalar", TTPU_B_ELEMENTWISE},
    {"fmod.Tensor", TTPU_B_ELEMENTWISE},
    {"remainder.Scalar", TTPU_B_ELEMENTWISE},
    {"remainder.Tensor", TTPU_B_ELEMENTWISE},
    {"bitwise_xor.Tensor", TTPU_B_ELEMENTWISE},
    {"logical_xor", TTPU_B_ELEMENTWISE},
    {"where.ScalarOther", TTPU_B_ELEMENTWISE},
    {"where.ScalarSelf", TTPU_B_ELEMENTWISE},
    {"where.Scalar", TTPU_B_ELEMENTWISE},
    {"fill_.Scalar", TTPU_B_ELEMENTWISE},
    {"fill_.Tensor", TTPU_B_ELEMENTWISE},
    {"zero_", TTPU_B_ELEMENTWISE},
    {"pow.Scalar", TTPU_B_ELEMENTWISE},
    {"atan2", TTPU_B_ELEMENTWISE},
    {"floor_divide", TTPU_B_ELEMENTWISE},
    {"bitwise_and.Scalar", TTPU_B_ELEMENTWISE},
    {"bitwise_or.Scalar", TTPU_B_ELEMENTWISE},
    {"threshold_backward", TTPU_B_ELEMENTWISE},
    {"silu_backward", TTPU_B_ELEMENTWISE},
    {"gelu_backward", TTPU_B_ELEMENTWISE},
    {"sigmoid_backward", TTPU_B_ELEMENTWISE},
    {"tanh_backward", TTPU_B_ELEMENTWISE},
    /* membership of the first operand's elements in a set */
    {"isin.Tensor_Tensor", TTPU_B_FIRST},
    {"isin.Tensor_Scalar", TTPU_B_FIRST},
    /* Reductions and contractions: right over any dims once the padding
     * holds the operation's identity. */
    {"sum", TTPU_B_FILL_ZERO},
    {"sum.dim_IntList", TTPU_B_FILL_ZERO},
    {"cumsum", TTPU_B_FILL_ZERO},
    {"mm", TTPU_B_MATMUL},
    {"bmm", TTPU_B_MATMUL},
    {"addmm", TTPU_B_MATMUL},
    {"baddbmm", TTPU_B_MATMUL},
    {"any", TTPU_B_FILL_ZERO},
    {"any.dim", TTPU_B_FILL_ZERO},
    {"_softmax_backward_data", TTPU_B_FILL_ZERO},
    {"_log_softmax_backward_data", TTPU_B_FILL_ZERO},
    /* an index of 0 in the padding stays in range */
    {"embedding", TTPU_B_FILL_ZERO},
    {"index_select", TTPU_B_FILL_ZERO},
    {"prod", TTPU_B_FILL_ONE},
    {"all", TTPU_B_FILL_ONE},
    {"all.dim", TTPU_B_FILL_ONE},
    {"max", TTPU_B_FILL_LOWEST},
    {"min", TTPU_B_FILL_HIGHEST},
    {"amax", TTPU_B_FILL_LOWEST},
    {"max.dim", TTPU_B_FILL_LOWEST},
    {"argmax", TTPU_B_FILL_LOWEST},
    {"logsumexp", TTPU_B_FILL_LOWEST},
    {"_softmax", TTPU_B_FILL_LOWEST},
    {"_log_softmax", TTPU_B_FILL_LOWEST},
    {"amin", TTPU_B_FILL_HIGHEST},
    {"min.dim", TTPU_B_FILL_HIGHEST},
    {"argmin", TTPU_B_FILL_HIGHEST},
    /* the padding holds 0; the count is the true one */
    {"mean", TTPU_B_MEAN},
    {"mse_loss", TTPU_B_MEAN},
    {"mse_loss_backward", TTPU_B_MEAN},
    {"mean.dim", TTPU_B_MEAN},
    /* Right only when no padded dim is among the dims they reduce: they
     * divide by the count of what they reduce. */
    {"var.correction", TTPU_B_OTHER_DIMS},
    {"native_layer_norm", TTPU_B_LAST_DIMS},
    /* grad_weight and grad_bias sum over the rows: zero rows add nothing */
    {"native_layer_norm_backward", TTPU_B_NORM_BACKWARD},
    /* Along a padded dim: the next operand at the first's true size. */
    {"cat", TTPU_B_CAT},
    {"constant_pad_nd", TTPU_B_PAD},
    {"nll_loss_forward", TTPU_B_NLL},
    {"nll_loss_backward", TTPU_B_NLL},
    {"embedding_dense_backward", TTPU_B_FILL_ZERO},
    {"arange.start_out", TTPU_B_FACTORY},
    /* Random fills: a value depends on its index and the rng state only
     * (ops/lower.c draws over the true shape). */
    {"uniform_", TTPU_B_FACTORY},
    {"normal_", TTPU_B_FACTORY},
    {"log_normal_", TTPU_B_FACTORY},
    {"exponential_", TTPU_B_FACTORY},
    {"cauchy_", TTPU_B_FACTORY},
    {"geometric_", TTPU_B_FACTORY},
    {"bernoulli_.float", TTPU_B_FACTORY},
    {"random_", TTPU_B_FACTORY},
    {"random_.from", TTPU_B_FACTORY},
    {"random_.to", TTPU_B_FACTORY},
    {"_index_put_impl_", TTPU_B_ACCUMULATE},
    /* a prompt written into a preallocated (static) cache */
    {"index_copy", TTPU_B_INDEX_COPY},
    {"index.Tensor", TTPU_B_INDEX},
};

static int* g_rules;
static int g_count;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void set_rule(const char* name, int rule) {
  int op = ttpu_op_lookup(name);
  if (op >= 0 && op < g_count) g_rules[op] = rule;
}

static void build(void) {
  g_count = ttpu_op_count();
  g_rules = calloc((size_t)g_count + 1, sizeof(int));
  if (!g_rules) return;
  char v[160];
  for (size_t k = 0; k < sizeof(kRules) / sizeof(kRules[0]); ++k) {
    const char* name = kRules[k].name;
    int rule = kRules[k].rule;
    set_rule(name, rule);
    const char* dot = strchr(name, '.');
    int base = dot ? (int)(dot - name) : (int)strlen(name);
    if (base > 0 && name[base - 1] == '_') continue; /* copy_: in-place only */
    /* op_.OV / op_ and op.out / op.OV_out */
    snprintf(v, sizeof(v), "%.*s_%s", base, name, dot ? dot : "");
    set_rule(v, rule);
    if (dot) {
      snprintf(v, sizeof(v), "%s_out", name);
      set_rule(v, rule);
    }
    snprintf(v, sizeof(v), "%.*s.out", base, name);
    set_rule(v, rule);
  }
}

int ttpu_op_bucket_rule(int op) {
  pthread_once(&g_once, build);
  return g_rules && op >= 0 && op < g_count ? g_rules[op] : TTPU_B_NONE;
}

int ttpu_op_bucket_rule_names(const char** names, int cap) {
  int n = (int)(sizeof(kRules) / sizeof(kRules[0]));
  for (int k = 0; k < n && k < cap; ++k) names[k] = kRules[k].name;
  return n;
}
