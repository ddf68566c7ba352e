/* hlo_internal.h - private pieces shared by the hlo/ builder files.
 *
 * Not part of the engine's interface: ops/ and the rest include only
 * ttpu_hlo.h. Cross-file helpers carry the ttpu_hloi_ prefix.
 */
#ifndef TTPU_HLO_INTERNAL_H_
#define TTPU_HLO_INTERNAL_H_

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ttpu_hlo.h"

/* Growable text. A failed allocation is remembered (oom) rather than
 * reported at every append, so emitters stay linear; the printer turns it
 * into TTPU_RESOURCE_EXHAUSTED. */
typedef struct {
  char* p;
  size_t n, cap;
  int oom;
} ttpu_hloi_buf;

void ttpu_hloi_buf_free(ttpu_hloi_buf* s);
void ttpu_hloi_buf_put(ttpu_hloi_buf* s, const char* str);
void ttpu_hloi_buf_printf(ttpu_hloi_buf* s, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Moves the text out (NUL-terminated, caller frees); NULL after oom. */
char* ttpu_hloi_buf_take(ttpu_hloi_buf* s);

/* "tensor<2x3xf32>" */
void ttpu_hloi_put_type(ttpu_hloi_buf* s, const ttpu_type* t);
/* "array<i64: 1, 2>" (and "array<i64>" when n == 0) */
void ttpu_hloi_put_array(ttpu_hloi_buf* s, const int64_t* v, int n);
/* "[1, 2]" */
void ttpu_hloi_put_list(ttpu_hloi_buf* s, const int64_t* v, int n);

/* ---- values and scopes */

/* Checks that v names a live value visible from the scope being built and
 * returns its type; sets the sticky error and returns NULL otherwise. */
const ttpu_type* ttpu_hloi_check(ttpu_hlo* b, ttpu_val v, const char* what);
/* 1 if the builder already holds an error. */
int ttpu_hloi_failed(const ttpu_hlo* b);
/* Validates a type given by a caller (dtype, rank, dims >= 0). */
int ttpu_hloi_type_ok(ttpu_hlo* b, const ttpu_type* t, const char* what);
int ttpu_hloi_same_type(const ttpu_type* a, const ttpu_type* b);
int ttpu_hloi_same_dims(const ttpu_type* a, const ttpu_type* b);
ttpu_type ttpu_hloi_scalar_type(ttpu_dtype dt);
/* "f32[2,3]" style, for error messages; static rotating storage is avoided
 * by writing into a caller array. */
void ttpu_hloi_type_desc(const ttpu_type* t, char* out, size_t cap);

/* Emits `results = "name"(operands) (regions) {attrs} : (...) -> (...)`.
 * regions is the already rendered "({...}, {...})" text or NULL; attrs the
 * inside of the attribute dictionary or NULL. Writes n_res new values to
 * outs (TTPU_VAL_ERROR on failure) and returns the first. */
ttpu_val ttpu_hloi_emit(ttpu_hlo* b, const char* name, const ttpu_val* ops,
                        int n_ops, const char* regions, const char* attrs,
                        const ttpu_type* res, int n_res, ttpu_val* outs);
/* What defined a value, for folds that look through it (under
 * ttpu_hlo_set_optimize only; ttpu_hloi_def answers OTHER otherwise, and
 * for values of another scope). */
enum {
  TTPU_HLOI_DEF_OTHER = 0,
  TTPU_HLOI_DEF_RESHAPE,   /* src reshaped */
  TTPU_HLOI_DEF_TRANSPOSE, /* src transposed by perm */
  TTPU_HLOI_DEF_CONVERT,   /* src converted */
  TTPU_HLOI_DEF_BROADCAST, /* src broadcast, its dim i to dim perm[i] */
};
void ttpu_hloi_set_def(ttpu_hlo* b, ttpu_val v, int def, ttpu_val src,
                       const int64_t* perm);
int ttpu_hloi_def(const ttpu_hlo* b, ttpu_val v, ttpu_val* src,
                  int64_t* perm);

/* Single-result shorthand. */
ttpu_val ttpu_hloi_op(ttpu_hlo* b, const char* name, const ttpu_val* ops,
                      int n_ops, const char* attrs, ttpu_type res);

/* Regions (reduction bodies, comparators). Between begin and end, ops are
 * appended to the region's text and may only use the block arguments, the
 * values defined inside, or function-level values. region_end appends the
 * stablehlo.return of rets and yields the rendered "{...}" text (caller
 * frees; NULL if the builder failed). */
void ttpu_hloi_region_begin(ttpu_hlo* b, const ttpu_type* arg_types, int n,
                            ttpu_val* args);
char* ttpu_hloi_region_end(ttpu_hlo* b, const ttpu_val* rets, int n);

/* A region computing the binary op of a reduction over scalars of dt.
 * Caller frees. */
char* ttpu_hloi_reducer_region(ttpu_hlo* b, ttpu_redop op, ttpu_dtype dt);
/* Identity element of op for dt, as a 0-d constant. */
ttpu_val ttpu_hloi_identity(ttpu_hlo* b, ttpu_redop op, ttpu_dtype dt);

/* ---- dtype helpers (the builder's own view; ttpu_dtype_* of the base
 * library name and size them) */
static inline int ttpu_hloi_is_unsigned(ttpu_dtype t) {
  return t == TTPU_U8 || t == TTPU_U16 || t == TTPU_U32 || t == TTPU_U64;
}
static inline int ttpu_hloi_is_signed_int(ttpu_dtype t) {
  return t == TTPU_I8 || t == TTPU_I16 || t == TTPU_I32 || t == TTPU_I64;
}
static inline int ttpu_hloi_is_intlike(ttpu_dtype t) {
  return ttpu_hloi_is_unsigned(t) || ttpu_hloi_is_signed_int(t);
}
static inline int ttpu_hloi_is_floatlike(ttpu_dtype t) {
  return t == TTPU_F16 || t == TTPU_BF16 || t == TTPU_F32 || t == TTPU_F64;
}
static inline int ttpu_hloi_is_complex(ttpu_dtype t) {
  return t == TTPU_C64 || t == TTPU_C128;
}
static inline int ttpu_hloi_dtype_valid(ttpu_dtype t) {
  return (int)t >= 0 && t < TTPU_DTYPE_COUNT;
}
/* Bit width of an element (bool counts as 8: its storage size). */
int ttpu_hloi_bits(ttpu_dtype t);
const char* ttpu_hloi_mlir(ttpu_dtype t);

#endif /* TTPU_HLO_INTERNAL_H_ */
