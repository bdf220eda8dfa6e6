/*
 * dsfiles.h - the conventions of a dataset's files, shared by the client
 * (libloader finds a dataset's files and opens them, with the caller's
 * permissions), the daemon and loaderctl (which read them), so that the
 * two sides agree on what a dataset is:
 *   - a directory made by loaderctl pack: DSFILES_MANIFEST, whose
 *     "format" is DSFILES_FORMAT and "version" DSFILES_VERSION, and its
 *     shards (man/loader-shard.5);
 *   - WebDataset .tar files read in place: dsfiles_tar_name() says which
 *     entries of a directory are its shards;
 *   - an LMDB environment read in place: its data file, whose meta page
 *     dsfiles_lmdb_meta() knows.
 * Header only: nothing here to link.
 */
#ifndef LD_DSFILES_H
#define LD_DSFILES_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define DSFILES_MANIFEST     "manifest.json"
#define DSFILES_FORMAT	     "loaderd-dataset"
#define DSFILES_VERSION	     1
#define DSFILES_MANIFEST_MAX (16 << 20) /* bytes a manifest may have */

/*
 * Is a directory entry of this name a tar shard of a WebDataset dataset:
 * a name ending in ".tar", with more before it, not hidden ("." first)?
 */
static inline bool dsfiles_tar_name(const char *name)
{
	size_t len = strlen(name);

	return len >= 5 && !strcmp(name + len - 4, ".tar") && name[0] != '.';
}

/* Bytes of a file's start that dsfiles_lmdb_meta() looks at. */
#define DSFILES_LMDB_META 20

/* Do a file's first DSFILES_LMDB_META bytes m say an LMDB data file: the
 * meta page's magic, 0xBEEFC0DE (little-endian) at byte 16? */
static inline bool dsfiles_lmdb_meta(const unsigned char *m)
{
	return (m[16] | m[17] << 8 | m[18] << 16 | (uint32_t)m[19] << 24) ==
	       0xBEEFC0DEu;
}

#endif /* LD_DSFILES_H */
