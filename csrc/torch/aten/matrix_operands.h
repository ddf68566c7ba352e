// How the boxed engine kernel hands the matrix ops (the products mm, bmm,
// addmm, baddbmm, ..., and the triangular solves) their operands: in few
// layouts, so that the programs they compile do not multiply with every
// stride pattern a caller can make.
//
// A program's signature holds each operand's strides. A product reads a
// row-major or column-major matrix (rows or columns may be a slice of a
// wider one) with its batch outermost, and any dim broadcast (stride 0),
// as it is, for free inside the dot; any other layout (a batch dim inside
// the matrix, a strided vector) is first copied into a
// contiguous tensor, the step a BLAS library takes for the same operands,
// so that its program is a small copy shared by every op. A triangular
// solve, whose work grows faster than its operands, takes contiguous
// operands only (LAPACK's callers copy into its one layout too). A written
// operand (out=, an in-place self) that is not contiguous is computed into
// a contiguous stand-in and copied into place. Dims of size 1 take the
// strides a contiguous tensor gives them, which address nothing and would
// only tell programs apart.
#pragma once

#include <ATen/Tensor.h>

namespace torchtpu {

// t's layout as a matrix op reads it directly (see above).
bool matrix_layout_direct(const at::Tensor& t);

// t contiguous once the strides of its size-1 dims are ignored.
bool dense_ignoring_unit_dims(const at::Tensor& t);

// t itself, or a view of the same memory whose size-1 dims have the
// strides of a contiguous tensor.
at::Tensor with_canonical_unit_strides(const at::Tensor& t);

}  // namespace torchtpu
