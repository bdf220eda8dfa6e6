/*
 * mixfile.h - a mixture file: a JSON file that lists a mixture's members
 * (libloader(3), Mixtures), which loader_open() takes as its dataset.
 *
 *   {"format": "loaderd-mixture", "version": 1, "epoch_size": 0,
 *    "members": [{"path": "fm-a/test", "proportion": 0.7},
 *                {"path": "s3://bucket/prefix", "proportion": 0.3,
 *                 "pipeline": "decode | center 224 | f32"}]}
 *
 * Each member has "path" and exactly one of "proportion" (a number > 0),
 * "repeat" (a number > 0) or "choose" (a whole number >= 1), and may
 * have "pipeline"; "epoch_size" (a whole number >= 0) is optional. No
 * other key is taken. A relative path is taken from the file's
 * directory. What the file's syntax cannot say wrong (proportions beside
 * repeat, a pipeline too long, values past the protocol's bounds) is
 * checked with the options' members by loader_make_members()
 * (openmsg.h), and by loaderctl mix inspect before it opens a member.
 *
 * Internal to libloader: compiled into it but not exported. loaderctl
 * compiles mixfile.c into itself as well (mix inspect reads the file
 * with it: one reader of the format), and so do the unit tests. No
 * handle, no connection.
 */
#ifndef LOADER_MIXFILE_H
#define LOADER_MIXFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader.h"

#define MIXFILE_FORMAT	  "loaderd-mixture"
#define MIXFILE_VERSION	  1
#define MIXFILE_MAX_BYTES (1 << 20) /* 32 members need a few KiB */

/*
 * A mixture file's members, as struct loader_member for loader_opts: the
 * strings belong to it (loader_mixfile_free()).
 */
struct loader_mixfile {
	uint32_t nmembers;
	uint64_t epoch_size;
	struct loader_member m[LOADER_MAX_MEMBERS];
	/*
	 * Each member's "path" as the file has it, where m[i].dataset is
	 * where it is read (a relative one from the file's directory): what
	 * loaderctl mix inspect shows beside it.
	 */
	char *path[LOADER_MAX_MEMBERS];
};

/*
 * Is path a mixture file rather than a dataset: a regular file whose
 * first byte that is not white space is '{' (a tar file begins with a
 * member's name, but is refused here by its "ustar" magic; an LMDB data
 * file with a page number)? An s3:// URL is not. Reads at most 512 bytes;
 * false when the file cannot be read (opening it as a dataset then says
 * why).
 */
bool loader_is_mixfile(const char *path);

/*
 * Parse a mixture file's text (len bytes, need not be NUL-terminated)
 * into *mf; name is the file's name in messages, dir the directory its
 * relative paths are taken from (NULL or ".": as they are). Returns 0,
 * -ENOMEM, LOADER_EVERSION (another "version") or LOADER_EFORMAT (not
 * JSON, not an object, another "format", a key unknown or missing, a
 * value of the wrong type or range), with the reason in why (whylen
 * bytes, may be 0) naming name, the member's number and the key. On
 * failure *mf holds nothing to free.
 */
int loader_mixfile_parse(struct loader_mixfile *mf, const char *text,
			 size_t len, const char *name, const char *dir,
			 char *why, size_t whylen);

/*
 * Read the mixture file at path (a regular file of at most
 * MIXFILE_MAX_BYTES) and parse it, its relative paths taken from its
 * directory. Returns as loader_mixfile_parse(), or the -errno of a file
 * that cannot be read, LOADER_ETOOBIG for a larger one.
 */
int loader_mixfile_load(struct loader_mixfile *mf, const char *path, char *why,
			size_t whylen);

/*
 * Free the strings of *mf and zero it. A string a caller has taken and
 * left NULL in its place is passed over.
 */
void loader_mixfile_free(struct loader_mixfile *mf);

#endif /* LOADER_MIXFILE_H */
