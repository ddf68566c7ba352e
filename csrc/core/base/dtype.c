/* dtype.c - element type facts, one table so that size, spelling and kind
 * cannot disagree. */
#include "ttpu.h"

typedef struct {
  size_t size;
  const char* mlir;
  const char* name;
  const char* title; /* c10's ScalarType name, as PyTorch's messages spell it */
  const char* cpp;   /* the C++ type's name, as c10's TypeMeta spells it */
  unsigned char is_float, is_int;
} dtype_info;

/* Indexed by ttpu_dtype; the order of ttpu.h's enum. */
static const dtype_info dtype_table[TTPU_DTYPE_COUNT] = {
    [TTPU_BOOL] = {1, "i1", "bool", "Bool", "bool", 0, 0},
    [TTPU_U8] = {1, "ui8", "uint8", "Byte", "unsigned char", 0, 1},
    [TTPU_I8] = {1, "i8", "int8", "Char", "signed char", 0, 1},
    [TTPU_I16] = {2, "i16", "int16", "Short", "short int", 0, 1},
    [TTPU_I32] = {4, "i32", "int32", "Int", "int", 0, 1},
    [TTPU_I64] = {8, "i64", "int64", "Long", "long int", 0, 1},
    [TTPU_F16] = {2, "f16", "float16", "Half", "c10::Half", 1, 0},
    [TTPU_BF16] = {2, "bf16", "bfloat16", "BFloat16", "c10::BFloat16", 1, 0},
    [TTPU_F32] = {4, "f32", "float32", "Float", "float", 1, 0},
    [TTPU_F64] = {8, "f64", "float64", "Double", "double", 1, 0},
    [TTPU_U16] = {2, "ui16", "uint16", "UInt16", "short unsigned int", 0, 1},
    [TTPU_U32] = {4, "ui32", "uint32", "UInt32", "unsigned int", 0, 1},
    [TTPU_U64] = {8, "ui64", "uint64", "UInt64", "long unsigned int", 0, 1},
    [TTPU_C64] = {8, "complex<f32>", "complex64", "ComplexFloat", "c10::complex<float>", 0, 0},
    [TTPU_C128] = {16, "complex<f64>", "complex128", "ComplexDouble", "c10::complex<double>", 0, 0},
};

static const dtype_info* info(ttpu_dtype t) {
  if ((int)t < 0 || (int)t >= TTPU_DTYPE_COUNT) return NULL;
  return &dtype_table[t];
}

/* Invalid dtypes answer 0 / "?" instead of crashing: callers validate, but
 * a message that prints a bad dtype should not be the thing that fails. */
size_t ttpu_dtype_size(ttpu_dtype t) {
  const dtype_info* i = info(t);
  return i ? i->size : 0;
}
const char* ttpu_dtype_mlir(ttpu_dtype t) {
  const dtype_info* i = info(t);
  return i ? i->mlir : "?";
}
const char* ttpu_dtype_name(ttpu_dtype t) {
  const dtype_info* i = info(t);
  return i ? i->name : "?";
}
const char* ttpu_dtype_torch_title(ttpu_dtype t) {
  const dtype_info* i = info(t);
  return i ? i->title : "?";
}

const char* ttpu_dtype_cpp_name(ttpu_dtype t) {
  const dtype_info* i = info(t);
  return i ? i->cpp : "?";
}
int ttpu_dtype_is_float(ttpu_dtype t) {
  const dtype_info* i = info(t);
  return i ? i->is_float : 0;
}
int ttpu_dtype_is_int(ttpu_dtype t) {
  const dtype_info* i = info(t);
  return i ? i->is_int : 0;
}

int ttpu_dtype_is_complex(ttpu_dtype t) {
  return t == TTPU_C64 || t == TTPU_C128;
}
ttpu_dtype ttpu_dtype_real(ttpu_dtype t) {
  return t == TTPU_C64 ? TTPU_F32 : t == TTPU_C128 ? TTPU_F64 : t;
}
ttpu_dtype ttpu_dtype_complex_of(ttpu_dtype t) {
  return t == TTPU_F32 ? TTPU_C64 : t == TTPU_F64 ? TTPU_C128 : TTPU_DTYPE_NONE;
}
