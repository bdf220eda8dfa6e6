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
 * RGB and CMYK, whole images and boxes). Channels are filtered
 * independently: 4 channels are CMYK or RGBX here, never premultiplied as
 * PIL treats RGBA.
 *
 * The weights depend only on the sizes and the box, so they are computed
 * once into a plan that any number of images and threads then share:
 * rsz_run() only reads the plan, writes into caller-owned memory and never
 * allocates, locks or calls the kernel. A plan can live in memory the
 * caller provides (rsz_plan_box), so that building one per sample, as
 * random crops need, does not allocate either.
 *
 * Two ways to crop:
 *  - A box plan (rsz_plan_box) resizes a rectangle with fractional
 *    corners, as PIL's resize(box=...) does: the filter may read pixels
 *    outside the box but inside the image, which is what makes the
 *    result of a whole-image plan and a box plan agree at a box's edge.
 *  - A plan for a w x h image run on src + y * stride + x * channels
 *    resizes the integer rectangle (x, y, w, h) and never reads outside
 *    it, which is what torchvision's resized_crop does (it crops, then
 *    resizes).
 *
 * On x86-64 processors with AVX2 the loops use it (chosen when a plan is
 * built); the results are the same bytes as the portable C loops'.
 */
#ifndef LD_RESIZE_H
#define LD_RESIZE_H

#include <stddef.h>
#include <stdint.h>

/* Largest width or height, in or out, that a plan accepts. */
#define RSZ_MAX_SIDE (1u << 20)

/* Flags for rsz_plan_box(). */
enum {
	/*
	 * Flip the result horizontally: output column j is what column
	 * out_w - 1 - j would have been. It costs nothing: the horizontal
	 * weights are simply stored in the reverse order.
	 */
	RSZ_MIRROR = 1u << 0,
	/*
	 * Use the portable C loops even where SIMD ones exist. The output
	 * is the same; this is for tests and benchmarks.
	 */
	RSZ_SCALAR = 1u << 1,
};

struct rsz_plan;

/*
 * Bytes of memory that rsz_plan_box() needs for any image of at most
 * max_in_w x max_in_h pixels, any box inside it and any flags, resized
 * to out_w x out_h. It includes the slack for aligning the plan, so the
 * memory may have any alignment. Sizes must be 1..RSZ_MAX_SIDE; returns
 * 0 otherwise. The bound is exact for the whole-image box of a
 * max_in_w x max_in_h image; smaller boxes may need less.
 */
size_t rsz_plan_bytes(uint32_t max_in_w, uint32_t max_in_h, uint32_t out_w,
		      uint32_t out_h);

/*
 * Build, inside mem (cap bytes, any alignment), the plan that resizes
 * the box (x0, y0, x1, y1) = box[0..3] of an in_w x in_h image to out_w
 * x out_h, as PIL's Image.resize((out_w, out_h), BILINEAR, box=box)
 * does. The box must satisfy 0 <= x0 < x1 <= in_w and 0 <= y0 < y1 <=
 * in_h; NULL means the whole image (0, 0, in_w, in_h), giving the same
 * plan as rsz_plan_new(). Like PIL, the corners are rounded to single
 * precision first. flags is 0 or more of RSZ_MIRROR and RSZ_SCALAR.
 *
 * Output pixel j of an axis is centred on x0 + (j + 0.5) * scale, with
 * scale = (x1 - x0) / out_w, and its filter is clipped to the image, not
 * to the box: rsz_run() may read pixels outside the box.
 *
 * Returns 0 with *out set, -EINVAL for a size, box or flag out of range
 * or a NULL mem or out, or -ENOSPC when cap is too small (cap =
 * rsz_plan_bytes() of at least these sizes always suffices). Nothing is
 * written outside mem[0..cap) and *out is NULL on failure. It never
 * allocates, and threads may build plans at once in distinct memory.
 *
 * The plan lives in mem: it stays valid while mem does and is not
 * written to, needs no rsz_plan_free(), and may be used from any number
 * of threads at once (rsz_run() only reads it).
 */
int rsz_plan_box(void *mem, size_t cap, uint32_t in_w, uint32_t in_h,
		 const double box[4], uint32_t out_w, uint32_t out_h,
		 unsigned flags, struct rsz_plan **out);

/*
 * Compute the weights for resizing in_w x in_h pixels to out_w x out_h,
 * in memory of the plan's own (rsz_plan_bytes(in_w, in_h, out_w, out_h)
 * bytes from malloc). Every size must be 1..RSZ_MAX_SIDE. Returns 0 with
 * *out set, -EINVAL for a size out of range or -ENOMEM. The plan belongs
 * to the caller: free it with rsz_plan_free().
 */
int rsz_plan_new(uint32_t in_w, uint32_t in_h, uint32_t out_w, uint32_t out_h,
		 struct rsz_plan **out);

/*
 * Free a plan from rsz_plan_new(). NULL is a no-op, and so is a plan
 * from rsz_plan_box(), whose memory is the caller's to release.
 */
void rsz_plan_free(struct rsz_plan *p);

/*
 * Bytes of scratch memory rsz_run() needs for this plan and channel
 * count: a window of horizontally resized rows (as many as the vertical
 * filter spans, not the whole image) plus one row of 32-bit accumulators.
 * It is 0 when each output row is one input row (the heights are equal
 * and the box is the whole height, or the box is as high as the output
 * and starts on a whole row). Returns 0 for a channel count other than
 * 1, 3 or 4 as well; rsz_run() rejects those.
 */
size_t rsz_scratch_size(const struct rsz_plan *p, unsigned channels);

/*
 * An upper bound of rsz_scratch_size() for every plan whose input is at
 * most max_in_h rows high and whose output is out_w x out_h, box and
 * flags as they may be: what a caller sizes its scratch by once. 0 for a
 * size out of range or a channel count other than 1, 3 or 4.
 */
size_t rsz_scratch_bytes(uint32_t max_in_h, uint32_t out_w, uint32_t out_h,
			 unsigned channels);

/*
 * Resize src (the whole in_h rows of in_w * channels bytes, src_stride
 * bytes apart, even for a box plan) into dst (out_h rows of out_w *
 * channels bytes, dst_stride apart). channels is 1, 3 or 4, interleaved;
 * each is filtered on its own. scratch holds rsz_scratch_size() bytes,
 * suitably aligned for int32_t (malloc's alignment suffices), and may be
 * NULL when that size is 0. src and dst must not overlap, nor either of
 * them scratch. Returns 0, or -EINVAL for a bad channel count or stride
 * (nothing is written then).
 *
 * It reads only pixels of src's rows (never padding past in_w), writes
 * only dst's out_w * channels bytes per row, never allocates, locks or
 * calls the kernel, and any number of threads may run it at once with
 * one plan, each with its own scratch and dst.
 */
int rsz_run(const struct rsz_plan *p, const uint8_t *src, size_t src_stride,
	    uint8_t *dst, size_t dst_stride, unsigned channels, void *scratch);

#endif /* LD_RESIZE_H */
