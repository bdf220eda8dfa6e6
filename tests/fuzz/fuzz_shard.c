/*
 * fuzz_shard.c - the shard reader on hostile files: header, footer,
 * index, schema and dictionaries (shard_open), then up to 64 records
 * read, split and every field checked (shard_read_record,
 * shard_check_field). Nothing past the file is read, nothing a length
 * claims is allocated past the file's size.
 */
#include <stdlib.h>

#include "codec.h"
#include "fuzz.h"
#include "shard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shard_field f[SCHEMA_MAX_FIELDS];
	struct codec_ctx *ctx = NULL;
	struct shard *sh = NULL;
	struct diag d;
	unsigned char *buf;
	int fd = fuzz_memfd(data, size);

	if (fd < 0)
		return 0;
	if (shard_open(&sh, fd, "fuzz.lds", &d) || codec_ctx_new(&ctx, 1 << 20))
		goto out;
	buf = malloc(size + 1);
	for (uint64_t i = 0; buf && i < shard_count(sh) && i < 64; i++) {
		if (shard_read_record(sh, i, buf, size + 1, f, &d))
			continue;
		for (unsigned k = 0; k < shard_schema(sh)->nfields; k++) {
			size_t n;

			(void)shard_check_field(sh, ctx, k, &f[k], &n, &d);
		}
	}
	free(buf);
out:
	codec_ctx_free(ctx);
	shard_close(sh);
	close(fd);
	return 0;
}
