/*
 * lmdbds.h - an LMDB database of samples: the convention, and its index
 * for reading it in place.
 *
 * The convention (loaderctl(1), pack, lmdb; loaderd(8), LMDB DATASETS):
 * every key/value pair of the main database is a sample, in key order.
 * A value is one of
 *   - a Caffe Datum (codecs/datum.h), as Caffe's convert_imageset writes
 *     ImageNet: fields jpg (its encoded image) or image (its pixels, a
 *     u8 tensor [channels, height, width]), and cls (its label);
 *   - a JPEG (FF D8 first): field jpg;
 *   - anything else: field value, bytes.
 * For the last two, keys of the form CLASS/NAME give a label, field cls:
 * the index of CLASS among the sorted class names (as ImageFolder's), or
 * every key has one or none does. The kind is the first value's; every
 * other value must be of it (and a Datum's pixels of its shape).
 *
 * The environment is opened read-only without a lock file (MDB_NOLOCK:
 * nothing may write the database while it is read), one read
 * transaction for as long as it is open: values are read in place
 * through LMDB's map. Every value is one run of bytes of the data file
 * (in a leaf page or on overflow pages), so the index of a database
 * read in place (a record index, recindex.h, as a tar's) gives each
 * sample's value as a record at its file offset, and a stream reads it
 * with io_uring like any record: LMDB itself runs only during the scan.
 */
#ifndef LD_LMDBDS_H
#define LD_LMDBDS_H

#include <stdbool.h>
#include <stdint.h>

#include "diag.h"
#include "schema.h"
#include "shard.h"

struct lmdbds;
struct recindex;

/*
 * Open the database at path: a directory holding data.mdb, or the data
 * file itself. Reads every key and value once (through the map) and
 * checks the first value's kind. Errors name path.
 */
int lmdbds_open(struct lmdbds **out, const char *path, struct diag *d);
void lmdbds_close(struct lmdbds *l);

const struct schema *lmdbds_schema(const struct lmdbds *l);
uint64_t lmdbds_count(const struct lmdbds *l);
/* Class names from CLASS/NAME keys (label order), or none. */
uint32_t lmdbds_classes(const struct lmdbds *l, char *const **names);

/*
 * Sample i's fields into f (pointers into the map, or into l for a
 * label: valid until the next call), and where names it for messages.
 */
int lmdbds_sample(struct lmdbds *l, uint64_t i, struct shard_field *f,
		  char *where, size_t wn, struct diag *d);

/* Bytes of the values read so far by lmdbds_sample(). */
uint64_t lmdbds_bytes_in(const struct lmdbds *l);

/* How long a database's scan may take (its child is then killed). */
#define LMDBDS_SCAN_MS (10 * 60 * 1000)

/*
 * What a daemon does with a client's descriptor of a data file: scan it
 * into an index in a child process (fork), which opens the database
 * through /proc/self/fd/FD, so that a damaged or hostile file LMDB
 * trusts can crash or hang only that child (killed after timeout_ms).
 * Returns 0, or the child's error with its reason in d.
 */
int lmdbds_index_fd(int fd, const char *name, int timeout_ms,
		    struct recindex **out, struct diag *d);

/* Is path an LMDB database (a directory with data.mdb, or a data file)? */
bool lmdbds_detect(const char *path);

/*
 * For tools (loaderctl inspect, verify): the data file of the database
 * at path as *fd, and its index read in place in *ix, made in a child as
 * lmdbds_index_fd() makes it.
 */
int lmdbds_index_path(const char *path, int *fd, struct recindex **ix,
		      struct diag *d);

#endif /* LD_LMDBDS_H */
