/* complex.h - how calls with complex operands are lowered (internal to
 * ops/). Most lowerings were written for real dtypes; a call with a
 * complex tensor, a complex result type or a complex Scalar runs the op's
 * complex lowering (ops/complex.c), or the op's own lowering where that is
 * known to be right for complex values (pure data movement), and fails
 * with NotImplementedError otherwise: never a silently wrong answer. */
#ifndef TTPU_OPS_COMPLEX_H_
#define TTPU_OPS_COMPLEX_H_

#include "ttpu_lower.h"

/* 1 when the call has a complex tensor, result type or Scalar. */
int ttpu_complex_call(const ttpu_op_call* call);
/* The lowering for a complex call of def's op, or NULL when none. */
ttpu_lower_fn ttpu_complex_lowering(const ttpu_op_def* def,
                                    const ttpu_op_call* call);

#endif /* TTPU_OPS_COMPLEX_H_ */
