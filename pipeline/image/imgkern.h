/*
 * imgkern.h - the image pipeline's last step, as a spec (ispec.h) says
 * it: normalize, cast and layout of a resized RGB image, vectorized.
 */
#ifndef LD_IMGKERN_H
#define LD_IMGKERN_H

#include <stdbool.h>
#include <stdint.h>

#include "ispec.h"

/*
 * The last stage: turn a resized RGB image (u8, HWC, w x h, which must be
 * sp->size on both sides) into ispec_out_bytes(sp) bytes at dst, in sp's
 * dtype and layout. Float outputs are x / 255 or, with normalize,
 * (x / 255 - mean) / std, computed in float as one multiply-add per
 * element; f16 is rounded to nearest even from that float. u8 is a copy
 * or a transposition. Returns 0, or -EINVAL if w or h is not sp->size.
 * Allocates nothing; safe to call from many threads at once.
 */
int imgkern_emit(const struct ispec *sp, const uint8_t *hwc, uint32_t w,
		 uint32_t h, void *dst);

/*
 * IEEE 754 binary32 -> binary16, round to nearest even: subnormals,
 * overflow to infinity, infinities and NaN (kept quiet, sign kept) all
 * handled. Exposed for the tests and for other f16 outputs.
 */
uint16_t imgkern_f32_to_f16(float f);

/*
 * Tests only: false makes imgkern_emit() use its portable loops (the
 * default, true, uses AVX2/F16C where the CPU has them); the bytes are
 * the same either way. Not thread-safe.
 */
void imgkern_test_simd(bool on);

#endif /* LD_IMGKERN_H */
