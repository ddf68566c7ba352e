/* ttpu_op.h - op calls: ATen calls packed for the lowering table.
 * Part of the public C API: ttpu.h includes every part, and its opening
 * comment states the conventions. */
#ifndef TTPU_OP_H_
#define TTPU_OP_H_

#include <stddef.h>
#include <stdint.h>

#include "ttpu_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ op calls */

/* A strided view of a storage: exactly PyTorch's tensor geometry. Sizes,
 * strides and offset are in elements of `dtype`. Borrowed.
 * Not thread-safe: a ttpu_tensor, ttpu_arg or ttpu_op_call is borrowed by
 * the call it is passed to and must not change while that call runs. */
typedef struct {
  ttpu_buffer* buffer;
  ttpu_dtype dtype;
  int ndim;
  const int64_t* sizes;
  const int64_t* strides;
  int64_t offset;
} ttpu_tensor;

typedef enum {
  TTPU_ARG_NONE = 0,   /* None / undefined tensor */
  TTPU_ARG_TENSOR,     /* tensors[tensor] */
  TTPU_ARG_TENSORS,    /* tensors[tensor .. tensor+n); a None entry in an
                          optional-tensor list has buffer == NULL */
  TTPU_ARG_INT,        /* i: compile-time int (dims, sizes, enums) */
  TTPU_ARG_BOOL,       /* i: 0/1, compile-time */
  TTPU_ARG_FLOAT,      /* f: compile-time float (eps, p, momentum) */
  TTPU_ARG_SCALAR,     /* a runtime Scalar (alpha, other, value): passed to
                          the program as data, so a new value never
                          recompiles. f holds it, or i when scalar_dtype is
                          integral/bool. scalar_dtype is its PyTorch type
                          (I64/F64/BOOL for Python numbers, C128 for a
                          Python complex, the tensor's dtype for a 0-d CPU
                          tensor). A complex Scalar has f (real part)
                          and fi (imaginary part). */
  TTPU_ARG_INTS,       /* ints[0..n) */
  TTPU_ARG_FLOATS,     /* floats[0..n) */
  TTPU_ARG_SCALARS,    /* runtime Scalar list: floats[0..n) (exact for
                          ints up to 2^53), scalar_dtype gives the kind */
  TTPU_ARG_STR,        /* str */
} ttpu_arg_kind;

typedef struct {
  ttpu_arg_kind kind;
  int64_t i;
  double f;
  ttpu_dtype scalar_dtype;
  int n;
  const int64_t* ints;
  const double* floats;
  int tensor;
  const char* str;
  double fi;           /* imaginary part of a complex SCALAR */
} ttpu_arg;

/* One ATen call, packed by the PyTorch glue. `op` is the id of an ATen
 * overload ("add.Tensor") from ttpu_op_lookup. args follow the ATen schema
 * in order. outputs are where results go, in this order: one per schema
 * return (a fresh tensor, or the aliased `self`/`out` argument of in-place
 * and out= overloads, possibly a view), then every other mutable argument
 * (Tensor(a!)) that no return aliases, in schema order (e.g. the running
 * statistics of batch norm). */
typedef struct {
  int op;
  int n_args;
  const ttpu_arg* args;
  int n_tensors;
  const ttpu_tensor* tensors;
  int n_outputs;
  const ttpu_tensor* outputs;
  /* PyTorch's result_type over the tensor and Scalar args (promotion as
   * on CPU), or TTPU_DTYPE_NONE when the glue did not compute it. */
  ttpu_dtype common_dtype;
  int device;
  /* torch.set_float32_matmul_precision for float32 contractions (matmul
   * family, convolution): 0 "highest" (full fp32: XLA HIGHEST; the value
   * of a zero-initialized call), 1 "high" (XLA HIGH: three bf16 passes),
   * 2 "medium" (XLA DEFAULT: one bf16 pass on a TPU). The numbering is
   * at::Float32MatmulPrecision's. Part of the program signature. */
  int matmul_precision;
  /* The autograd pass that issued the call: 0 outside one (a forward, an
   * optimizer step), else the autograd engine's graph task id + 1. Never
   * part of a program: a fused window that has written 32 MiB ends where
   * it changes, so a large training step runs as forward, backward and
   * update windows, whose activations pass between programs as buffers. */
  int autograd_task;
} ttpu_op_call;

/* Id of an ATen overload name ("add.Tensor", "relu.default" is "relu"),
 * or -1 if the engine has no lowering for it. */
/* Thread-safe: the op table is fixed at build time. */
int ttpu_op_lookup(const char* name);
/* Name of op id; static string. */
const char* ttpu_op_name(int op);
/* Number of ops in the lowering table; ids are 0..count-1. */
int ttpu_op_count(void);

/* Runs one op: lowers (or finds in the cache), compiles, enqueues. Output
 * storages get their new versions immediately (pending until the program
 * finishes). Inputs are borrowed. */
ttpu_status* ttpu_op_run(ttpu_runtime* rt, const ttpu_op_call* call);
/* Thread-safe: calls from several threads are serialized by the runtime's
 * lock, in the order they take it. */

/* The refusal ttpu_op_run would give a call before lowering it (an op
 * without a complex lowering given complex values, a dtype of a kind the
 * CPU kernel does not dispatch), NULL when it has none. For calls with
 * nothing to compute (every output empty), which the glue does not run,
 * so that they fail as the CPU's do. Caller owns the status.
 * Thread-safe. */
ttpu_status* ttpu_op_refusal(const ttpu_op_call* call);

/* ------------------------------------------------------- outside functions */

/* Functions defined outside the engine (StableHLO a front end lowered,
 * such as a JAX function) are called through the op
 * "torchtpu::extern_call" (args: the input tensors as one list, then the
 * callee's name as a STR; outputs: one per result, of the callee's result
 * types). The callee's text is module-level StableHLO: private func.func
 * ops, one named `callee`, every other symbol in it prefixed so that it
 * cannot clash; a program that calls it carries the text once. Because
 * the name is part of the op's signature, the text must never differ for
 * one name: derive the name from the text.
 *
 * Defines callee for this process. Defining a name again with the same
 * text is a no-op; with another text, INVALID_ARGUMENT. Definitions live
 * until the process exits. Thread-safe. */
ttpu_status* ttpu_extern_define(const char* callee, const char* text);
/* The text defining callee, or NULL. Valid for the process. Thread-safe. */
const char* ttpu_extern_text(const char* callee);

/* A function's body: the ops called from begin to end are recorded into
 * a window of their own and never run (whatever the mode, inside a graph
 * too: the window in force is set aside and comes back at the end);
 * anything that would wait for them (a host read, synchronize) fails.
 * end lowers them to a StableHLO function of params (tensors the ops read:
 * dense, at offset 0, each covering its storage) returning results
 * (tensors the ops computed, dense and covering likewise), defines it for
 * the process as ttpu_extern_define does and writes its name (derived
 * from its text) to name. results NULL: the ops are dropped, nothing is
 * defined. Functions nest (8 deep). Refused: a body that reads a tensor
 * other than params, draws random numbers, changes a param in place or
 * checks data on the device. Thread rule: the runtime's lock orders the
 * calls, but a body is one thread's: record it from one thread. */
ttpu_status* ttpu_runtime_begin_function(ttpu_runtime* rt);
ttpu_status* ttpu_runtime_end_function(ttpu_runtime* rt,
                                       const ttpu_tensor* params, int n_params,
                                       const ttpu_tensor* results,
                                       int n_results, char* name,
                                       size_t name_cap);
/* A loop over a body defined above (ttpu_runtime_end_function): a
 * function of (carry..., xs..., consts...) returning (carry..., ys...)
 * that runs body(carry..., x_t..., consts...) -> (carry..., y_t...) for
 * t = 0 .. length-1 as one stablehlo.while, x_t the slice t of each xs
 * along dim 0 and ys stacked along a new dim 0 (PyTorch's scan); reverse
 * nonzero: t = length-1 .. 0, y_t still stored at row t. Types:
 * carry, xs (with their dim 0 of `length`), consts and the body's ys (one
 * step's, without it) as tensors whose dtype, ndim and sizes count (the
 * rest is ignored). Defined for the process as ttpu_extern_define does;
 * its name (from its text) is written to name, to call it through
 * "torchtpu::extern_call". Thread-safe. */
ttpu_status* ttpu_scan_define(const char* body, int64_t length, int reverse,
                              const ttpu_tensor* carry, int n_carry,
                              const ttpu_tensor* xs, int n_xs,
                              const ttpu_tensor* consts, int n_consts,
                              const ttpu_tensor* ys, int n_ys, char* name,
                              size_t name_cap);

#ifdef __cplusplus
}
#endif

#endif /* TTPU_OP_H_ */
