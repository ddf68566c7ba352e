/* upsample_u8.h - what the resizing lowerings share (internal to ops/):
 * uint8 bilinear and bicubic resizing in the CPU's fixed-point arithmetic
 * (ops/upsample_u8.c) and the window matrix of a separable resize
 * (ops/upsample_aa.c). */
#ifndef TTPU_OPS_UPSAMPLE_U8_H_
#define TTPU_OPS_UPSAMPLE_U8_H_

#include "ttpu_lower.h"

/* The forward of upsample_bilinear2d / upsample_bicubic2d (antialias 0)
 * or of _upsample_bilinear2d_aa / _upsample_bicubic2d_aa (antialias 1) on
 * a uint8 tensor, from the call's args (self, output_size, align_corners,
 * scales_h, scales_w) into output 0. Inputs the CPU's answer cannot be
 * reproduced for fail with TTPU_UNIMPLEMENTED in the builder. out_final:
 * output 0 is where the caller's result lives (the op's own out= form is
 * lowered here too), not a temporary that an out= form copies from. */
ttpu_status* ttpu_upsample_u8(ttpu_lower* L, int cubic, int antialias, int out_final);

/* The (out, in) matrix of a resize along one dim whose output o reads the
 * K inputs from vx[o] (i64[out]) on with weights vw[o*K .. o*K+K) (a flat
 * value of dtype dt): W[o, i] = vw[o*K + i - vx[o]] inside the window,
 * else 0. */
ttpu_val ttpu_upsample_window_matrix(ttpu_hlo* b, ttpu_val vw, ttpu_val vx, int64_t K, int64_t in, int64_t out,
                                     ttpu_dtype dt);

#endif /* TTPU_OPS_UPSAMPLE_U8_H_ */
