/*
 * pack.h - the pack engine: a source (IDX, ImageFolder, tar) into a
 * sharded dataset directory.
 *
 * This is what `loaderctl pack` runs, as a library module: the caller
 * fills a struct pack_params and calls pack_run(), which reads the source
 * through its ops table (source.h), compresses fields as asked (training
 * zstd dictionaries if asked), writes shards of about shard_size bytes
 * and the manifest, and reports its progress through a callback. The
 * engine prints nothing; the caller decides what to show.
 *
 * Ownership: the engine borrows everything in struct pack_params for the
 * duration of pack_run() and keeps nothing after it returns. Pointers
 * handed to the progress callback are valid only during that callback.
 */
#ifndef LD_PACK_H
#define LD_PACK_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"
#include "source.h"

/* Ranges that pack_run() accepts (loaderctl pack checks the same). */
#define PACK_SHARD_SIZE_MIN 4096u
#define PACK_LEVEL_MIN	    1
#define PACK_LEVEL_MAX	    22
#define PACK_QUALITY_MIN    1u
#define PACK_QUALITY_MAX    100u
#define PACK_DICT_SIZE_MIN  1024u
#define PACK_MAX_SIDE_MAX   65535u
/* Largest image pack decodes to scale it down (--max-side, --max-pixels). */
#define PACK_DECODE_PIXELS_MAX (1ull << 30)
/* Largest --jpeg-restart interval, MCUs per segment (jrst.h). */
#define PACK_JPEG_RESTART_MAX 64u

/*
 * Compression of tensor and bytes fields (JPEG fields are transcoded
 * losslessly instead, see jpeg_restart).
 */
enum pack_compress {
	PACK_COMPRESS_NONE,
	PACK_COMPRESS_ZSTD,
};

/* What happened, in the order a split goes through them. */
enum pack_event {
	PACK_BEGIN,  /* a split starts; total is known */
	PACK_SAMPLE, /* one sample was written */
	PACK_SKIP,   /* one sample was skipped (skip_bad); msg says why */
	PACK_ASIS,   /* a JPEG is stored as it was, not transcoded; msg: why */
	PACK_DONE,   /* the split's dataset is in place; stats */
	/*
	 * Something the caller should know of the dataset directory (msg):
	 * a temporary directory of a killed pack removed, or what of the
	 * replaced directory could not be removed.
	 */
	PACK_NOTE,
};

/* Figures of one packed split. */
struct pack_stats {
	uint64_t records;   /* samples written */
	uint64_t skipped;   /* samples skipped (skip_bad) */
	uint32_t shards;    /* shard files written */
	uint64_t bytes_in;  /* source payload bytes read */
	uint64_t bytes_out; /* shard bytes written */
	double seconds;	    /* from opening the source to the manifest */
	/* JPEG payloads: transcoded, stored as-is, bytes before and after */
	uint64_t jpeg_transcoded, jpeg_as_is;
	uint64_t jpeg_bytes_before, jpeg_bytes_after;
	/* image fields that hold a PNG (stored as they are) */
	uint64_t png;
	/* what the source found and did not pack (ImageFolder) */
	struct source_left left;
};

/*
 * One progress report. Every pointer in it is valid only during the
 * callback that receives it.
 */
struct pack_progress {
	enum pack_event event;
	const char *split;  /* the split packed, NULL if the source has none */
	const char *outdir; /* its dataset directory */
	uint64_t done;	    /* samples read so far, written or skipped */
	uint64_t total;	    /* samples in the split */
	const char *msg;    /* PACK_SKIP, PACK_ASIS: the sample and why */
	const struct pack_stats *stats; /* PACK_DONE; else NULL */
};

/*
 * The progress callback. Called on the thread that runs pack_run(), once
 * per event (PACK_SAMPLE once per sample). Return 0 to go on, or a
 * negative code to stop the pack: pack_run() returns that code, after
 * removing what it wrote; every dataset directory is left as it was.
 * (Its return value is ignored for PACK_DONE and PACK_NOTE.)
 */
typedef int pack_progress_fn(const struct pack_progress *p, void *arg);

/*
 * What to pack, and how. Every field must be set: a zeroed struct is not
 * valid (loaderctl pack's defaults are shard_size 256 MiB, level 3,
 * dict_size 112 KiB, shuffle -1, quality 90, jpeg_restart 1).
 */
struct pack_params {
	const struct source_ops *format; /* from pack_source_find() */
	const char *src;		 /* the source path */
	/*
	 * The dataset directory, created with its parents, or replaced
	 * whole (outdir.h). A source with splits (IDX: train, test) gets one
	 * dataset per split, in outdir/SPLIT.
	 */
	const char *outdir;
	const char *split;   /* pack only this split; NULL: every split */
	const char *classes; /* "A,B,..." class names in label order, or NULL */
	const char *ragged;  /* "A,B": ragged .npy fields of a tar, or NULL */
	uint64_t shard_size; /* target shard bytes; a record is never split */
	enum pack_compress compress;
	int level;	    /* zstd level */
	bool dict;	    /* train a dictionary per field (implies zstd) */
	uint64_t dict_size; /* largest dictionary to train */
	int64_t shuffle;    /* seed of a shuffle before packing; -1: none */
	uint64_t max_side;  /* re-encode JPEGs with a longer side; 0: as-is */
	/*
	 * Re-encode images of more pixels than this, scaled to at most
	 * this many (aspect kept); 0: as-is. With either, pack decodes
	 * images up to PACK_DECODE_PIXELS_MAX to scale them down.
	 */
	uint64_t max_pixels;
	uint64_t quality; /* JPEG quality when re-encoding */
	/*
	 * Transcode JPEG fields losslessly to baseline with a restart marker
	 * every jpeg_restart MCUs (1..PACK_JPEG_RESTART_MAX) and optimal
	 * Huffman tables, so that a crop decodes from its own segments
	 * (jrst.h); 0 stores them as they are. A JPEG that cannot be
	 * transcoded (arithmetic-coded, not 8-bit, damaged) is stored as it
	 * is, reported with PACK_ASIS.
	 */
	uint32_t jpeg_restart;
	bool skip_bad; /* skip samples that fail to read, not stop */
	bool force;    /* replace a dataset already in the directory */
	pack_progress_fn *progress; /* may be NULL */
	void *arg;		    /* passed to progress */
};

/*
 * The source format named format ("idx", "imagefolder", "tar"), or with
 * format NULL or "auto" the first whose detect() accepts path. Returns a
 * static ops table, or NULL if none matches.
 */
const struct source_ops *pack_source_find(const char *format, const char *path);

/*
 * Pack p->src into p->outdir. Each dataset (split) is built in a
 * temporary directory beside its own (PACK_BEGIN ... its samples), and
 * only once all are built are they swapped into place, each reported
 * by PACK_DONE then. Returns 0, or a negative code with a message in d
 * (which may be NULL): LOADER_EUSAGE for parameters out of range,
 * -EEXIST for a directory that already holds a dataset without
 * p->force (found before any packing), -ENOENT for a source without
 * samples or a split it does not have, or what reading or writing
 * failed with. On failure every dataset directory is as it was: no
 * file this run did not make is touched, and what it made is removed.
 */
int pack_run(const struct pack_params *p, struct diag *d);

#endif /* LD_PACK_H */
