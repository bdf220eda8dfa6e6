/*
 * fuzz_wds.c - a WebDataset tar scanned into samples and read in place
 * (pipeline/format/wds.c), and an index as the daemon's state holds it: an
 * input that starts with the index magic is loaded as a kept index
 * (what a damaged or planted state file would give), any other is a tar:
 * scanned, indexed, saved and loaded back, and every sample's fields
 * found as a stream finds them.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "shard.h"
#include "wds.h"

/* Split every record of shard sh, reading it from fd (or zeros). */
static void split_all(const struct shard *sh, int fd)
{
	static unsigned char buf[1 << 16];
	struct shard_field f[SCHEMA_MAX_FIELDS];
	struct diag d;

	for (uint64_t i = 0; i < shard_count(sh) && i < 4096; i++) {
		struct shard_rec r;

		if (shard_rec(sh, i, &r) || r.length > sizeof(buf))
			continue;
		memset(buf, 0, r.length);
		if (fd >= 0 && pread(fd, buf, r.length, (off_t)r.offset) < 0)
			continue;
		(void)shard_parse_record(sh, i, buf, r.length, f, &d);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct recindex *ix = NULL, *back = NULL;
	struct shard *sh = NULL;
	struct diag d;
	void *blob;
	size_t len;
	int fd;

	if (size >= 32 && !memcmp(data, "LDWDSIX1", 8)) {
		uint64_t fsize;

		memcpy(&fsize, data + 24, 8);
		if (!recindex_load(&ix, data, size, fsize, &d) &&
		    !shard_open_wds(&sh, -1, "fuzz.tar", ix, &d))
			split_all(sh, -1);
		shard_close(sh);
		recindex_free(ix);
		return 0;
	}
	fd = fuzz_memfd(data, size);
	if (fd < 0)
		return 0;
	if (!wds_index_scan(&ix, fd, "fuzz.tar", &d)) {
		if (!shard_open_wds(&sh, fd, "fuzz.tar", ix, &d))
			split_all(sh, fd);
		shard_close(sh);
		sh = NULL;
		if (!recindex_save(ix, &blob, &len)) {
			if (!recindex_load(&back, blob, len, ix->file_size,
					   &d) &&
			    !shard_open_wds(&sh, fd, "fuzz.tar", back, &d))
				split_all(sh, fd);
			shard_close(sh);
			recindex_free(back);
			free(blob);
		}
		recindex_free(ix);
	}
	close(fd);
	return 0;
}
