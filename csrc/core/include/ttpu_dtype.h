/* ttpu_dtype.h - element types.
 * Part of the public C API: ttpu.h includes every part, and its opening
 * comment states the conventions. */
#ifndef TTPU_DTYPE_H_
#define TTPU_DTYPE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most dimensions a tpu tensor has (view_as_real of a complex tensor
 * adds one: PyTorch's 12-d test shapes need 13). */
#define TTPU_MAX_DIMS 16

/* ------------------------------------------------------------------ dtypes */

typedef enum {
  TTPU_BOOL = 0,
  TTPU_U8,
  TTPU_I8,
  TTPU_I16,
  TTPU_I32,
  TTPU_I64,
  TTPU_F16,
  TTPU_BF16,
  TTPU_F32,
  TTPU_F64,
  TTPU_U16,   /* the unsigned wide types exist for the engine's own use */
  TTPU_U32,   /* (random bits, bit casts) */
  TTPU_U64,
  /* Complex: a storage holds them as PyTorch lays them out, interleaved
   * (re, im) pairs, and the engine keeps that storage physically as the
   * real component type with twice the elements; programs see complex
   * values (prog/assemble.c turns pairs into complex values and back). */
  TTPU_C64,
  TTPU_C128,
  TTPU_DTYPE_COUNT,
  TTPU_DTYPE_NONE = -1,
} ttpu_dtype;

/* Thread-safe: pure functions of their argument. */
size_t ttpu_dtype_size(ttpu_dtype t);
/* MLIR element type spelling: "i1", "ui8", "f32", ... (static string). */
const char* ttpu_dtype_mlir(ttpu_dtype t);
/* Readable name: "bool", "uint8", "float32", ... (static string). */
const char* ttpu_dtype_name(ttpu_dtype t);
/* PyTorch's (c10 ScalarType) name, as its error messages spell it:
 * "Bool", "Byte", "Long", "Float", ... (static string). */
const char* ttpu_dtype_torch_title(ttpu_dtype t);
/* The C++ type's name, as PyTorch's TypeMeta messages spell it: "float",
 * "short int", "c10::Half", ... (static string). */
const char* ttpu_dtype_cpp_name(ttpu_dtype t);
int ttpu_dtype_is_float(ttpu_dtype t);
int ttpu_dtype_is_int(ttpu_dtype t);   /* signed or unsigned integer, not bool */
/* complex64 / complex128 (not counted as float by ttpu_dtype_is_float). */
int ttpu_dtype_is_complex(ttpu_dtype t);
/* The component type of a complex dtype (F32 for C64, F64 for C128); any
 * other dtype is its own. */
ttpu_dtype ttpu_dtype_real(ttpu_dtype t);
/* The complex dtype with component t (C64 for F32, C128 for F64), or
 * TTPU_DTYPE_NONE. */
ttpu_dtype ttpu_dtype_complex_of(ttpu_dtype t);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_DTYPE_H_ */
