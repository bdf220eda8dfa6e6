/*
 * zrec.h - zstd records: compression, dictionaries, dictionary training.
 *
 * Decompression goes through the codec table (CODEC_ZSTD); this header
 * holds the rest: the compressor used at pack time, digested dictionaries
 * shared by every decoding thread, and dictionary training (ZDICT).
 * Every record is one self-contained zstd frame that carries its content
 * size, so the decoded size is known from the frame header alone.
 */
#ifndef LD_ZREC_H
#define LD_ZREC_H

#include <stddef.h>

#include "diag.h"

struct zrec_enc;
struct zrec_ddict;

/*
 * Create a compressor at level (1..ZSTD_maxCLevel()), with an optional
 * dictionary (dict may be NULL when dict_len is 0). The dictionary bytes
 * are copied. Not thread-safe. Returns 0 or a negative code.
 */
int zrec_enc_new(struct zrec_enc **out, int level, const void *dict,
		 size_t dict_len, struct diag *d);

/* Free a compressor. NULL is a no-op. */
void zrec_enc_free(struct zrec_enc *enc);

/* The largest frame zrec_compress() can produce for n input bytes. */
size_t zrec_bound(size_t n);

/*
 * Compress src into one frame at dst (cap bytes, at least zrec_bound(n)
 * for certain success); *out_len gets the frame size.
 */
int zrec_compress(struct zrec_enc *enc, const void *src, size_t n, void *dst,
		  size_t cap, size_t *out_len, struct diag *d);

/*
 * Digest a dictionary for decompression. The result is read-only and may
 * be shared by any number of threads; the bytes are copied.
 */
int zrec_ddict_new(struct zrec_ddict **out, const void *dict, size_t len,
		   struct diag *d);

/* Free a digested dictionary. NULL is a no-op. */
void zrec_ddict_free(struct zrec_ddict *dd);

/*
 * Train a dictionary of at most cap bytes from n samples stored back to
 * back in samples (sizes[i] bytes each). *out_len gets its size. Fails
 * with LOADER_EDECODE (and a reason) when the samples are too few or too
 * small for zstd to learn from.
 */
int zrec_train(void *dict, size_t cap, const void *samples, const size_t *sizes,
	       unsigned n, size_t *out_len, struct diag *d);

#endif /* LD_ZREC_H */
