/* table.c - the one lowering table: every op family's definitions, looked
 * up by ATen overload name. Adding a family: define its array in its own
 * file and list it in `families` below. */
#include <string.h>

#include "ttpu_lower.h"

extern const ttpu_op_def ttpu_ops_copy[];
extern const ttpu_op_def ttpu_ops_elementwise[];
extern const ttpu_op_def ttpu_ops_unary[];
extern const ttpu_op_def ttpu_ops_activation[];
extern const ttpu_op_def ttpu_ops_index[];
extern const ttpu_op_def ttpu_ops_shape[];
extern const ttpu_op_def ttpu_ops_sort[];
extern const ttpu_op_def ttpu_ops_reduce[];
extern const ttpu_op_def ttpu_ops_nn[];
extern const ttpu_op_def ttpu_ops_random[];
extern const ttpu_op_def ttpu_ops_foreach[];
extern const ttpu_op_def ttpu_ops_linalg[];
extern const ttpu_op_def ttpu_ops_conv[];
extern const ttpu_op_def ttpu_ops_amp[];
extern const ttpu_op_def ttpu_ops_special[];
extern const ttpu_op_def ttpu_ops_scan[];
extern const ttpu_op_def ttpu_ops_matrix[];
extern const ttpu_op_def ttpu_ops_layout[];
extern const ttpu_op_def ttpu_ops_lu[];
extern const ttpu_op_def ttpu_ops_setops[];
extern const ttpu_op_def ttpu_ops_polynomial[];
extern const ttpu_op_def ttpu_ops_margin[];
extern const ttpu_op_def ttpu_ops_qr[];
extern const ttpu_op_def ttpu_ops_rrelu[];
extern const ttpu_op_def ttpu_ops_svd[];
extern const ttpu_op_def ttpu_ops_bessel[];
extern const ttpu_op_def ttpu_ops_eigh[];
extern const ttpu_op_def ttpu_ops_matrix_exp[];
extern const ttpu_op_def ttpu_ops_unique[];
extern const ttpu_op_def ttpu_ops_upsample_bicubic[];
extern const ttpu_op_def ttpu_ops_histogram[];
extern const ttpu_op_def ttpu_ops_intmath[];
extern const ttpu_op_def ttpu_ops_fractional_pool[];
extern const ttpu_op_def ttpu_ops_lstsq[];
extern const ttpu_op_def ttpu_ops_ctc[];
extern const ttpu_op_def ttpu_ops_complex[];
extern const ttpu_op_def ttpu_ops_fft[];
extern const ttpu_op_def ttpu_ops_embedding_bag[];
extern const ttpu_op_def ttpu_ops_segment[];
extern const ttpu_op_def ttpu_ops_grid_sample[];
extern const ttpu_op_def ttpu_ops_upsample_aa[];

static const ttpu_op_def* const families[] = {
    ttpu_ops_copy,
    ttpu_ops_elementwise,
    ttpu_ops_unary,
    ttpu_ops_activation,
    ttpu_ops_index,
    ttpu_ops_shape,
    ttpu_ops_sort,
    ttpu_ops_reduce,
    ttpu_ops_nn,
    ttpu_ops_random,
    ttpu_ops_foreach,
    ttpu_ops_linalg,
    ttpu_ops_conv,
    ttpu_ops_amp,
    ttpu_ops_special,
    ttpu_ops_scan,
    ttpu_ops_matrix,
    ttpu_ops_layout,
    ttpu_ops_lu,
    ttpu_ops_setops,
    ttpu_ops_polynomial,
    ttpu_ops_margin,
    ttpu_ops_qr,
    ttpu_ops_rrelu,
    ttpu_ops_svd,
    ttpu_ops_bessel,
    ttpu_ops_eigh,
    ttpu_ops_matrix_exp,
    ttpu_ops_unique,
    ttpu_ops_upsample_bicubic,
    ttpu_ops_histogram,
    ttpu_ops_intmath,
    ttpu_ops_fractional_pool,
    ttpu_ops_lstsq,
    ttpu_ops_ctc,
    ttpu_ops_complex,
    ttpu_ops_fft,
    ttpu_ops_embedding_bag,
    ttpu_ops_segment,
    ttpu_ops_grid_sample,
    ttpu_ops_upsample_aa,
};

#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

/* Ids are positions in the concatenation of the families, in order. The
 * table is immutable, so lookups need no lock. */
static const ttpu_op_def* def_at(int op) {
  if (op < 0) return NULL;
  for (size_t f = 0; f < N_FAMILIES; ++f) {
    int n = 0;
    while (families[f][n].name) ++n;
    if (op < n) return &families[f][op];
    op -= n;
  }
  return NULL;
}

const ttpu_op_def* ttpu_op_def_get(int op) { return def_at(op); }

int ttpu_op_count(void) {
  int n = 0;
  for (size_t f = 0; f < N_FAMILIES; ++f)
    for (int k = 0; families[f][k].name; ++k) ++n;
  return n;
}

const char* ttpu_op_name(int op) {
  const ttpu_op_def* d = def_at(op);
  return d ? d->name : "?";
}

int ttpu_op_lookup(const char* name) {
  int id = 0;
  for (size_t f = 0; f < N_FAMILIES; ++f)
    for (int k = 0; families[f][k].name; ++k, ++id)
      if (!strcmp(families[f][k].name, name)) return id;
  return -1;
}
