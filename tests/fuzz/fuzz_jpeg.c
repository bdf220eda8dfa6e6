/*
 * fuzz_jpeg.c - the image paths a stream takes (JPEGs, and PNGs through
 * the same decoder): the header (jroi_header), a region decode
 * (jroi_decode, restart segments when the file has them), and the restart-segment parser, walker and
 * builder (jrst_parse, jrst_check, jrst_build) with a crop taken from
 * the input's first bytes. The region decode must not depend on what the
 * decoder read before: a fresh decoder must give the same result, or
 * the target aborts.
 */
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "fuzz.h"
#include "jroi.h"
#include "jrst.h"

#define MAX_PIXELS (1u << 20)

static struct jroi_dec *dec;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char dst[MAX_PIXELS * 4], dst2[MAX_PIXELS * 4];
	struct jroi_dec *fresh;
	int rc;
	struct jroi_info info;
	struct jroi_out out;
	struct jroi_req req = { 0 };
	struct jrst_map m;
	struct diag d;
	uint16_t sel[4] = { 0 };

	if (!dec && jroi_new(&dec, MAX_PIXELS))
		return 0;
	if (size >= 8) {
		memcpy(sel, data, 8);
		data += 8;
		size -= 8;
	}
	if (jroi_header(dec, data, size, &info, &d))
		return 0;
	req.x = info.width ? sel[0] % info.width : 0;
	req.y = info.height ? sel[1] % info.height : 0;
	req.w = 1 + (info.width > req.x ? sel[2] % (info.width - req.x) : 0);
	req.h = 1 + (info.height > req.y ? sel[3] % (info.height - req.y) : 0);
	rc = jroi_decode(dec, data, size, &req, dst, 0, sizeof(dst), &out, &d);
	if (!jroi_new(&fresh, MAX_PIXELS)) {
		struct jroi_out o2;
		int rc2 = jroi_decode(fresh, data, size, &req, dst2, 0,
				      sizeof(dst2), &o2, &d);

		jroi_free(fresh);
		if (rc != rc2 ||
		    (!rc && (out.width != o2.width || out.height != o2.height ||
			     out.channels != o2.channels ||
			     memcmp(dst, dst2,
				    (size_t)out.width * out.height *
					    out.channels))))
			abort(); /* the result depends on earlier inputs */
	}
	if (!jrst_parse(data, size, &m, &d)) {
		struct jrst_rect r = { req.x, req.y, req.w, req.h }, c;
		size_t cap = jrst_build_bound(size), n;
		unsigned char *sub = malloc(cap);

		(void)jrst_check(&m, data, size, &d);
		jrst_cover(&m, &r, &c);
		if (sub)
			(void)jrst_build(&m, data, size, &c, sub, cap, &n, &d);
		free(sub);
	}
	return 0;
}
