/*
 * jpgset.h - every JPEG under a directory, read into memory: the fixed
 * input that the decode benchmarks (loaderctl pipeline --profile,
 * bench/jpeg_decode) run over and over, so that they time decoding and
 * never the disk.
 */
#ifndef LD_JPGSET_H
#define LD_JPGSET_H

#include <stddef.h>
#include <stdint.h>

#include "diag.h"

/* No JPEG is larger than this; a bigger file is refused before reading. */
#define JPGSET_FILE_MAX (1ull << 30)

/* One file of a set; the set owns both pointers. */
struct jpgset_file {
	unsigned char *data;
	size_t len;
	char *path; /* DIR/.../NAME, DIR as given to jpgset_load() */
};

struct jpgset;

/*
 * Read every .jpg/.jpeg file (any case) under dir, recursively, in the
 * order of alphasort() at each level, so that every run sees the same
 * sequence. Hidden entries (a name starting with '.') and symbolic links
 * to directories (which could loop) are skipped. A directory without
 * JPEGs gives an empty set, not an error. Returns 0 with the set in *out
 * (jpgset_free() it), or a negative code with the path and the problem
 * in d.
 */
int jpgset_load(struct jpgset **out, const char *dir, struct diag *d);

/*
 * The files, in load order, and their count in *n. The array stays valid
 * until jpgset_free().
 */
const struct jpgset_file *jpgset_files(const struct jpgset *s, size_t *n);

/* The sum of the files' sizes. */
uint64_t jpgset_bytes(const struct jpgset *s);

/* Free a set. NULL is a no-op. */
void jpgset_free(struct jpgset *s);

/*
 * Read one JPEG file whole, with jpgset_load()'s limit and messages:
 * *buf (the caller frees it) gets its *len bytes. Returns 0, or a
 * negative code with path and the problem in d; *buf is then NULL.
 */
int jpgset_read(const char *path, unsigned char **buf, size_t *len,
		struct diag *d);

#endif /* LD_JPGSET_H */
