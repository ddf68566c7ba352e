/* test_op_table.c - the expanded op table: each name once; lookup by name
 * and by id agree; every record has a lowering. (That each name is an
 * operator PyTorch knows is tests/test_op_table.py's to check, against
 * PyTorch's own registry.) */
#include <stdlib.h>
#include <string.h>

#include "ops/ttpu_lower.h"
#include "ttpu_test.h"

static int cmp_str(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

static void test_names_unique(ttpu_test_ctx* t) {
  int n = ttpu_op_count();
  const char** names = malloc((size_t)n * sizeof(*names));
  TTPU_CHECK(t, names != NULL);
  for (int id = 0; id < n; ++id) names[id] = ttpu_op_name(id);
  qsort(names, (size_t)n, sizeof(*names), cmp_str);
  int dup = -1;
  for (int i = 1; i < n && dup < 0; ++i)
    if (!strcmp(names[i - 1], names[i])) dup = i;
  if (dup >= 0)
    ttpu_test_fail(t, __FILE__, __LINE__, "%s listed twice", names[dup]);
  free(names);
}

static void test_lookup_round_trip(ttpu_test_ctx* t) {
  int n = ttpu_op_count();
  TTPU_CHECK(t, n > 0);
  for (int id = 0; id < n; ++id) {
    const ttpu_op_def* d = ttpu_op_def_get(id);
    TTPU_CHECK(t, d != NULL && d->fn != NULL && d->variants == 0);
    TTPU_CHECK(t, !strcmp(d->name, ttpu_op_name(id)));
    if (ttpu_op_lookup(ttpu_op_name(id)) != id) {
      ttpu_test_fail(t, __FILE__, __LINE__, "lookup(%s) = %d, expected %d",
                     ttpu_op_name(id), ttpu_op_lookup(ttpu_op_name(id)), id);
      return;
    }
  }
  TTPU_CHECK(t, ttpu_op_def_get(-1) == NULL && ttpu_op_def_get(n) == NULL);
  TTPU_CHECK(t, ttpu_op_lookup("no_such_op.out") == -1);
  TTPU_CHECK(t, ttpu_op_lookup("") == -1);
}

/* Derived overloads carry their record's lowering and parameter. */
static void test_variants_share_record(ttpu_test_ctx* t) {
  static const char* const groups[][3] = {
      {"add.Tensor", "add_.Tensor", "add.out"},
      {"relu", "relu_", "relu.out"},
      {"eq.Scalar", "eq.Scalar_out", "eq.Scalar"},
  };
  for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); ++g) {
    const ttpu_op_def* base = ttpu_op_def_get(ttpu_op_lookup(groups[g][0]));
    TTPU_CHECK(t, base != NULL);
    for (int k = 1; k < 3; ++k) {
      const ttpu_op_def* v = ttpu_op_def_get(ttpu_op_lookup(groups[g][k]));
      TTPU_CHECK(t, v != NULL && v->fn == base->fn && v->param == base->param &&
                        v->flags == base->flags &&
                        v->complex_fn == base->complex_fn);
    }
  }
}

static const ttpu_test kTests[] = {
    {"names_unique", test_names_unique},
    {"lookup_round_trip", test_lookup_round_trip},
    {"variants_share_record", test_variants_share_record},
    {NULL, NULL},
};
TTPU_TEST_SUITE(op_table, kTests)
