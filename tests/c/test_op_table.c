/* test_op_table.c - the expanded op table: the names it answers for are
 * exactly tests/c/op_names.txt (sorted, one a line), each once; lookup by
 * name and by id agree; every record has a lowering. */
#include <stdlib.h>
#include <string.h>

#include "ops/ttpu_lower.h"
#include "ttpu_test.h"

static int cmp_str(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* The fixture next to this file, as a sorted array of n names (caller
 * frees the array and *buf), or NULL. */
static char** read_fixture(int* n, char** buf) {
  char path[512];
  const char* file = __FILE__;
  const char* slash = strrchr(file, '/');
  int dir = slash ? (int)(slash - file) : 0;
  snprintf(path, sizeof(path), "%.*s%sop_names.txt", dir, file, slash ? "/" : "");
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  *buf = malloc((size_t)size + 1);
  char** names = *buf ? malloc(((size_t)size + 1) * sizeof(*names)) : NULL;
  if (!names || fread(*buf, 1, (size_t)size, f) != (size_t)size) {
    fclose(f);
    free(names);
    free(*buf);
    *buf = NULL;
    return NULL;
  }
  fclose(f);
  (*buf)[size] = '\0';
  *n = 0;
  for (char* line = strtok(*buf, "\n"); line; line = strtok(NULL, "\n"))
    if (*line) names[(*n)++] = line;
  return names;
}

static void test_names_match_fixture(ttpu_test_ctx* t) {
  int n_fix = 0;
  char* buf = NULL;
  char** fix = read_fixture(&n_fix, &buf);
  TTPU_CHECK(t, fix != NULL);
  int n = ttpu_op_count();
  const char** names = malloc((size_t)n * sizeof(*names));
  for (int id = 0; names && id < n; ++id) names[id] = ttpu_op_name(id);
  int ok = names != NULL && n == n_fix;
  if (ok) {
    qsort(names, (size_t)n, sizeof(*names), cmp_str);
    for (int i = 0; i < n; ++i)
      if (strcmp(names[i], fix[i])) {
        ttpu_test_fail(t, __FILE__, __LINE__, "name %d: %s, expected %s", i,
                       names[i], fix[i]);
        ok = 0;
        break;
      }
  } else if (names) {
    ttpu_test_fail(t, __FILE__, __LINE__, "%d names, expected %d", n, n_fix);
  }
  free(names);
  free(fix);
  free(buf);
  TTPU_CHECK(t, ok);
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
    {"names_match_fixture", test_names_match_fixture},
    {"names_unique", test_names_unique},
    {"lookup_round_trip", test_lookup_round_trip},
    {"variants_share_record", test_variants_share_record},
    {NULL, NULL},
};
TTPU_TEST_SUITE(op_table, kTests)
