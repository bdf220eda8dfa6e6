/*
 * wds.h - a WebDataset-style tar: its samples, found by one scan of the
 * member headers, and the index that a stream reads it in place with.
 *
 * WebDataset stores a sample as consecutive tar members that share a
 * key: "dir/0001.jpg", "dir/0001.cls" and "dir/0001.txt" are the fields
 * jpg, cls and txt of sample "dir/0001". The key is the member path up
 * to the first dot of its base name, the extension is everything after
 * that dot ("a.seg.png" is field "seg.png" of key "a"). As WebDataset
 * does, members that cannot be fields are skipped (anything but regular
 * files, base names that start with a dot or have no extension) and
 * extensions are compared in lower case.
 *
 * The first sample's extensions make the schema: jpg/jpeg members jpeg
 * fields, cls/cls2/label/index/idx members (decimal text) int64 fields,
 * .npy members tensor fields (dtype and shape from the first sample's
 * NumPy header; ragged, "[*,...]", for the names given), the rest bytes
 * fields. Every sample must have the same extensions, and a key met
 * again after other samples is refused, naming it: a tar made without
 * --sort=name is never split into two samples silently.
 *
 * Two users: loaderctl pack (ctl/src_tar.c) reads members through
 * wds_item() and converts them itself; a stream reads a tar in place
 * through wds_index_build(), which reads each label's text and each
 * .npy header once and makes an index a shard is opened on
 * (shard_open_wds()): a sample is the byte range from its first
 * member's data to its last one's end, read as one record, its fields
 * found by the index (recindex.h), which serializes for the daemon to
 * keep it in its state, keyed by the file's identity.
 */
#ifndef LD_WDS_H
#define LD_WDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"
#include "npy.h"
#include "recindex.h"
#include "schema.h"

#define WDS_EXT_MAX SCHEMA_NAME_MAX

/* Where one member of a sample lies. */
struct wds_item {
	uint64_t off; /* data offset in the tar */
	uint32_t len;
	uint16_t spell; /* the extension as written, for messages */
};

struct wds;

/*
 * Scan the tar on fd (name for messages; ragged: comma-separated .npy
 * fields whose first dimension varies, "*" for any that turns out so,
 * or NULL). Reads headers only,
 * and the first sample's .npy headers. Errors name the tar and the
 * offset of the member at fault.
 */
int wds_scan(struct wds **out, int fd, const char *name, const char *ragged,
	     struct diag *d);
void wds_free(struct wds *w);

const struct schema *wds_schema(const struct wds *w);
uint64_t wds_count(const struct wds *w);
enum rec_conv wds_conv(const struct wds *w, unsigned field);
/* Sample i's key; member k of it (schema order). */
const char *wds_key(const struct wds *w, uint64_t i);
const struct wds_item *wds_item(const struct wds *w, uint64_t i, unsigned k);

/* "tar: member KEY.EXT at offset N" of sample i's member k, for messages. */
void wds_where(const struct wds *w, uint64_t i, unsigned k, char *buf,
	       size_t n);

/* A decimal integer member's value (spaces around it allowed). */
int wds_parse_int(const unsigned char *text, size_t len, int64_t *v,
		  struct diag *d);

/*
 * Check a .npy member's header (hdr: its first len bytes, len >= the
 * header) against field f: the same dtype and shape (a ragged field:
 * any first dimension), C order, and that member_len is exactly header
 * and array. *n gets the header.
 */
int wds_check_npy(const struct field *f, const unsigned char *hdr, size_t len,
		  uint64_t member_len, struct npy_info *n, struct diag *d);

/* ---- read in place ------------------------------------------------ */

/*
 * Scan the tar on fd and make its index (auto_ragged), in one call:
 * what a reader of one tar does (loaderctl inspect and verify, a stream
 * without a kept index).
 */
int wds_index_scan(struct recindex **out, int fd, const char *name,
		   struct diag *d);

/*
 * The .tar files of directory dir (no manifest: a WebDataset dataset),
 * sorted by name, into *names (*n; free each and the array). Returns 0,
 * LOADER_EFORMAT when there is none, or -errno, described in d.
 */
int wds_list(const char *dir, char ***names, size_t *n, struct diag *d);

/* Is the file on fd a tar (its name ends in .tar, or its first block is a header)? */
bool wds_is_tar(int fd, const char *name);

#endif /* LD_WDS_H */
