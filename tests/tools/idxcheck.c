/*
 * idxcheck.c - test helper: does a packed dataset hold exactly the images
 * and labels of an IDX pair?
 *
 *	idxcheck [--shuffled] IMAGES LABELS DATASET
 *
 * Without --shuffled, record i must equal item i, bit for bit. With it,
 * the records must be a permutation of the items (compared as sorted
 * 64-bit hashes of image and label) and not the identity order. Exit 0
 * when they match, 1 when not, 2 on errors.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>
#include <zlib.h>

#include "codec.h"
#include "dataset.h"
#include "shard.h"

static unsigned char *load_idx(const char *path, size_t skip, size_t *len)
{
	gzFile gz = gzopen(path, "rb");
	size_t cap = 1 << 20, n = 0;
	unsigned char *buf = malloc(cap);
	int r;

	if (!gz || !buf) {
		fprintf(stderr, "idxcheck: %s: cannot open\n", path);
		exit(2);
	}
	while ((r = gzread(gz, buf + n, (unsigned)(cap - n))) > 0) {
		n += (size_t)r;
		if (n == cap)
			buf = realloc(buf, cap *= 2);
	}
	gzclose(gz);
	if (n < skip) {
		fprintf(stderr, "idxcheck: %s: too short\n", path);
		exit(2);
	}
	*len = n - skip;
	memmove(buf, buf + skip, n - skip);
	return buf;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int shuffled = argc > 1 && !strcmp(argv[1], "--shuffled");
	unsigned char *img, *lab, rec[1 << 16], buf[1 << 16];
	size_t nimg, nlab, item = 28 * 28, got;
	struct codec_ctx *ctx;
	struct dataset *ds;
	struct diag d;
	uint64_t *ha, *hb, n, k = 0, same = 0;

	if (argc - shuffled != 4) {
		fprintf(stderr,
			"usage: idxcheck [--shuffled] IMAGES LABELS DATASET\n");
		return 2;
	}
	argv += shuffled;
	img = load_idx(argv[1], 16, &nimg);
	lab = load_idx(argv[2], 8, &nlab);
	n = nlab;
	if (nimg != n * item) {
		fprintf(stderr,
			"idxcheck: %zu image bytes for %" PRIu64 " labels\n",
			nimg, n);
		return 2;
	}
	if (dataset_load(&ds, argv[3], &d) || codec_ctx_new(&ctx, 0)) {
		fprintf(stderr, "idxcheck: %s\n", d.msg);
		return 2;
	}
	if (ds->records != n) {
		printf("record count %" PRIu64 ", IDX has %" PRIu64 "\n",
		       ds->records, n);
		return 1;
	}
	ha = calloc(n, sizeof(*ha));
	hb = calloc(n, sizeof(*hb));
	for (uint32_t s = 0; s < ds->nshards; s++) {
		struct shard_field f[SCHEMA_MAX_FIELDS];
		struct shard *sh;
		int fd;

		if (dataset_open_shard(ds, s, &fd, &sh, &d)) {
			fprintf(stderr, "idxcheck: %s\n", d.msg);
			return 2;
		}
		for (uint64_t i = 0; i < shard_count(sh); i++, k++) {
			unsigned char item_lab[8 + 28 * 28];
			int64_t label;

			if (shard_read_record(sh, i, rec, sizeof(rec), f, &d) ||
			    shard_unpack_field(sh, ctx, 0, &f[0], buf,
					       sizeof(buf), &got, &d)) {
				printf("%s\n", d.msg);
				return 1;
			}
			if (got != item || f[1].len != 8) {
				printf("record %" PRIu64
				       ": image %zu bytes, label %u bytes\n",
				       k, got, f[1].len);
				return 1;
			}
			memcpy(&label, f[1].data, 8);
			if (!shuffled && (memcmp(buf, img + k * item, item) ||
					  label != lab[k])) {
				printf("record %" PRIu64
				       " differs from IDX item %" PRIu64
				       " (label %" PRId64 " vs %u)\n",
				       k, k, label, lab[k]);
				return 1;
			}
			memcpy(item_lab, f[1].data, 8);
			memcpy(item_lab + 8, buf, item);
			ha[k] = XXH3_64bits(item_lab, sizeof(item_lab));
			memset(item_lab, 0, 8);
			item_lab[0] = lab[k];
			memcpy(item_lab + 8, img + k * item, item);
			hb[k] = XXH3_64bits(item_lab, sizeof(item_lab));
			same += ha[k] == hb[k];
		}
		shard_close(sh);
		close(fd);
	}
	if (shuffled) {
		qsort(ha, n, sizeof(*ha), cmp_u64);
		qsort(hb, n, sizeof(*hb), cmp_u64);
		if (memcmp(ha, hb, n * sizeof(*ha))) {
			printf("records are not a permutation of the IDX items\n");
			return 1;
		}
		if (same == n) {
			printf("records are in IDX order, not shuffled\n");
			return 1;
		}
	}
	printf("%" PRIu64 " records match%s\n", n,
	       shuffled ? " (as a permutation)" : "");
	free(img);
	free(lab);
	free(ha);
	free(hb);
	codec_ctx_free(ctx);
	dataset_free(ds);
	return 0;
}
