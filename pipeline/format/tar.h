/*
 * tar.h - a small reader for tar archives (ustar, GNU and pax).
 *
 * The reader walks the headers of an archive on a file descriptor with
 * pread and hands out one member at a time: its full path, type, size
 * and where its data lies. It never reads the data itself, so a scan of
 * a large archive costs one 512-byte read per header. It understands
 * GNU long names (typeflag 'L'), pax extended headers ('x': the "path"
 * and "size" records) and the ustar prefix field, and skips pax global
 * headers ('g') and GNU long link names ('K').
 *
 * Everything the reader takes from the file is checked before use:
 * header checksums, numeric fields, and that a member's data lies inside
 * the file. Errors name the archive and the byte offset of the header at
 * fault.
 */
#ifndef LD_TAR_H
#define LD_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

#define TAR_BLOCK 512
/*
 * Longest name (GNU 'L' member) and pax header we accept; real ones are
 * far shorter, and the bound keeps a corrupt size from becoming a huge
 * allocation.
 */
#define TAR_META_MAX (1u << 20)

/* Type flags the callers look at ('\0' from old tars is reported as '0'). */
#define TAR_REG	   '0'
#define TAR_LNK	   '1'
#define TAR_SYM	   '2'
#define TAR_DIR	   '5'
#define TAR_CONTIG '7'

/* One member, as tar_next() returns it. */
struct tar_member {
	/*
	 * Full path, NUL-terminated; owned by the reader and valid until the
	 * next tar_next() or tar_close(). It never contains a NUL byte.
	 */
	const char *name;
	size_t name_len;
	char type;	     /* typeflag; 'S' also for pax sparse files */
	uint64_t size;	     /* bytes of data */
	uint64_t header_off; /* its first header (a long name or pax one) */
	uint64_t data_off;   /* the data: [data_off, data_off + size) */
};

struct tar_reader;

/*
 * Start reading the archive on fd (open for reading; the reader neither
 * moves its file position nor closes it, and fd must stay open while the
 * reader is in use). name is used in error messages and copied. Returns
 * 0, or -ENOMEM or -errno from fstat.
 */
int tar_open(struct tar_reader **out, int fd, const char *name, struct diag *d);

/*
 * Read the next member's headers into *m. Returns 1 with *m filled, 0 at
 * the end of the archive (two zero blocks, or end of file at a block
 * boundary), or a negative code: LOADER_ECHECKSUM (a header checksum),
 * LOADER_EFORMAT (a bad numeric field or pax record), LOADER_ETRUNC (the
 * file ends inside a header or a member), LOADER_ETOOBIG (a name or pax
 * header above TAR_META_MAX), -ENOMEM or -errno. After an error or the
 * end, every further call returns the same result again.
 */
int tar_next(struct tar_reader *t, struct tar_member *m, struct diag *d);

/* Free a reader (not its fd). NULL is a no-op. */
void tar_close(struct tar_reader *t);

/*
 * True when blk (TAR_BLOCK bytes) is a ustar or GNU header with a valid
 * checksum: a cheap test of whether a file is a tar archive.
 */
bool tar_is_header(const void *blk);

/* True for the types that hold a plain file's bytes ('0' and '7'). */
static inline bool tar_is_regular(char type)
{
	return type == TAR_REG || type == TAR_CONTIG;
}

#endif /* LD_TAR_H */
