/*
 * fuzz_jrst.c - pack's lossless transcode to restart segments
 * (jrst_transcode) on any input, with the interval and Huffman choice
 * taken from its first byte. What it writes must be a JPEG that the
 * segment parser accepts and that decodes to exactly the pixels of the
 * input: a transcode that changes one pixel aborts, as a crash would.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "jroi.h"
#include "jrst.h"

#define MAX_PIXELS (1u << 18)

static struct jroi_dec *dec;
static struct jrst_enc *enc;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char a[MAX_PIXELS * 3], b[MAX_PIXELS * 3];
	struct jrst_params p = { 0 };
	struct jroi_out oa, ob;
	const unsigned char *out;
	struct jrst_map m;
	size_t len;
	struct diag d;

	if ((!dec && jroi_new(&dec, MAX_PIXELS)) ||
	    (!enc && jrst_enc_new(&enc, MAX_PIXELS)))
		return 0;
	if (size < 1)
		return 0;
	p.interval = 1 + data[0] % JRST_INTERVAL_MAX;
	p.optimize = data[0] & 0x80;
	data++;
	size--;
	if (jrst_transcode(enc, data, size, &p, &out, &len, &d))
		return 0;
	if (jrst_parse(out, len, &m, &d) || jrst_check(&m, out, len, &d))
		abort(); /* pack would store what streams cannot cut */
	/* Only inputs that decode cleanly are compared. */
	if (jroi_decode(dec, data, size, NULL, a, 0, sizeof(a), &oa, &d))
		return 0;
	if (jroi_decode(dec, out, len, NULL, b, 0, sizeof(b), &ob, &d) ||
	    oa.width != ob.width || oa.height != ob.height ||
	    oa.channels != ob.channels ||
	    memcmp(a, b, (size_t)oa.width * oa.height * oa.channels))
		abort(); /* not lossless */
	return 0;
}
