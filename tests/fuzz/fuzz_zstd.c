/*
 * fuzz_zstd.c - zstd records as a shard stores them: the input is split
 * at its first two bytes into a dictionary (digested with
 * zrec_ddict_new(), or none) and a frame, which is probed, decoded into
 * a bounded buffer and checked through a window (what verify does).
 */
#include <string.h>

#include "codec.h"
#include "fuzz.h"
#include "zrec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char dst[1 << 20];
	static struct codec_ctx *ctx;
	const struct codec_ops *z = codec_get(CODEC_ZSTD);
	struct zrec_ddict *dd = NULL;
	struct codec_src src;
	struct codec_info info;
	struct diag d;
	size_t dlen;

	if (!ctx && codec_ctx_new(&ctx, 1 << 20))
		return 0;
	if (size < 2)
		return 0;
	dlen = (size_t)(data[0] | data[1] << 8);
	data += 2;
	size -= 2;
	if (dlen > size)
		dlen = 0;
	if (dlen && zrec_ddict_new(&dd, data, dlen, &d))
		dd = NULL;
	src = (struct codec_src){ data + dlen, size - dlen, dd };
	if (!z->probe(ctx, &src, &info, &d))
		(void)z->decode(ctx, &src, dst, sizeof(dst), &info, &d);
	(void)z->check(ctx, &src, &info, &d);
	zrec_ddict_free(dd);
	return 0;
}
