/*
 * resize.h - separable resampling of interleaved 8-bit images.
 *
 * The filter is the antialiased triangle ("bilinear") of PIL's
 * Image.resize(BILINEAR, reducing_gap=None) and torchvision's
 * resize(antialias=True): when shrinking, its support grows with the
 * scale factor, so every input pixel contributes and nothing aliases;
 * when enlarging it is plain bilinear interpolation. Weights are computed
 * in double precision exactly as PIL does and applied in 22-bit fixed
 * point, horizontal pass first, with the intermediate rounded to 8 bits;
 * results match PIL's to the bit (checked against Pillow 9.4 for gray,
 * RGB and CMYK). Channels are filtered independently: 4 channels are
 * CMYK or RGBX here, never premultiplied as PIL treats RGBA.
 *
 * The weights depend only on the sizes, so they are computed once into a
 * plan (rsz_plan_new) that any number of images and threads then share:
 * rsz_run() only reads the plan, writes into caller-owned memory and never
 * allocates, locks or calls the kernel.
 *
 * Cropping needs no support of its own: to resize the rectangle (x, y,
 * w, h) of an image, make a plan for w x h and pass src + y * stride +
 * x * channels. Pixels outside the rectangle are then never read, which
 * is what torchvision's resized_crop does (it crops, then resizes);
 * PIL's resize(box=...) differs in letting the filter reach outside.
 */
#ifndef LD_RESIZE_H
#define LD_RESIZE_H

#include <stddef.h>
#include <stdint.h>

/* Largest width or height, in or out, that a plan accepts. */
#define RSZ_MAX_SIDE (1u << 20)

struct rsz_plan;

/*
 * Compute the weights for resizing in_w x in_h pixels to out_w x out_h.
 * Every size must be 1..RSZ_MAX_SIDE. Returns 0 with *out set, -EINVAL
 * for a size out of range or -ENOMEM. The plan belongs to the caller:
 * free it with rsz_plan_free().
 */
int rsz_plan_new(uint32_t in_w, uint32_t in_h, uint32_t out_w, uint32_t out_h,
		 struct rsz_plan **out);

/* Free a plan. NULL is a no-op. */
void rsz_plan_free(struct rsz_plan *p);

/*
 * Bytes of scratch memory rsz_run() needs for this plan and channel
 * count: a window of horizontally resized rows (as many as the vertical
 * filter spans, not the whole image) plus one row of 32-bit accumulators.
 * It is 0 when one of the two passes is an identity. Returns 0 for a
 * channel count other than 1, 3 or 4 as well; rsz_run() rejects those.
 */
size_t rsz_scratch_size(const struct rsz_plan *p, unsigned channels);

/*
 * Resize src (in_h rows of in_w * channels bytes, src_stride bytes
 * apart) into dst (out_h rows of out_w * channels bytes, dst_stride
 * apart). channels is 1, 3 or 4, interleaved; each is filtered on its
 * own. scratch holds rsz_scratch_size() bytes, suitably aligned for
 * int32_t (malloc's alignment suffices), and may be NULL when that size
 * is 0. src and dst must not overlap. Returns 0, or -EINVAL for a bad
 * channel count or stride (nothing is written then).
 */
int rsz_run(const struct rsz_plan *p, const uint8_t *src, size_t src_stride,
	    uint8_t *dst, size_t dst_stride, unsigned channels, void *scratch);

#endif /* LD_RESIZE_H */
