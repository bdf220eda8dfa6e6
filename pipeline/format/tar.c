/*
 * tar.c - walk the headers of a tar archive.
 *
 * Header layout (POSIX ustar, with the GNU variations):
 *
 *	  0 name[100]     124 size[12]    148 chksum[8]   156 typeflag
 *	257 magic[6]      263 version[2]  345 prefix[155] (ustar only)
 *	482 isextended (old GNU sparse headers)
 *
 * Data follows its header, padded to a multiple of 512 bytes. The reader
 * keeps only the offset of the next header, so nothing it holds grows
 * with the archive.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fdio.h"
#include "loader_error.h"
#include "tar.h"

#define OFF_NAME    0
#define OFF_SIZE    124
#define OFF_CHKSUM  148
#define OFF_TYPE    156
#define OFF_MAGIC   257
#define OFF_VERSION 263
#define OFF_PREFIX  345
#define OFF_ISEXT   482
/* In an old GNU sparse extension block, the "another one follows" flag. */
#define OFF_EXT_ISEXT 504

struct tar_reader {
	int fd;
	char *name; /* the archive, for messages */
	uint64_t fsize;
	uint64_t off;	 /* the next header */
	int state;	 /* 0 reading, 1 at the end, < 0 the error */
	struct diag err; /* the error, repeated by later calls */
	char *path;	 /* the member handed out last */
	size_t path_cap;
	unsigned char *meta; /* data of 'L' and 'x' members */
	size_t meta_cap;
	/* What 'L' and 'x' headers say about the member that follows them. */
	char *long_name;
	char *pax_path;
	uint64_t pax_size;
	bool has_pax_size;
	bool pax_sparse;
	bool pending;	      /* some of the above is set */
	uint64_t pending_off; /* the first of those headers */
};

static bool is_zero(const unsigned char *b)
{
	for (unsigned i = 0; i < TAR_BLOCK; i++)
		if (b[i])
			return false;
	return true;
}

/*
 * Octal, as tar writes it: leading spaces, at least one digit, then
 * only spaces or NULs to the end of the field (or no terminator at all,
 * which GNU tar writes for values that need every byte).
 */
static int parse_octal(const unsigned char *p, size_t n, uint64_t *v)
{
	size_t i = 0, digits = 0;
	uint64_t x = 0;

	while (i < n && p[i] == ' ')
		i++;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++, digits++) {
		if (x > (UINT64_MAX >> 3))
			return -ERANGE;
		x = x << 3 | (uint64_t)(p[i] - '0');
	}
	if (!digits)
		return -EINVAL;
	for (; i < n; i++)
		if (p[i] != ' ' && p[i] != '\0')
			return -EINVAL;
	*v = x;
	return 0;
}

/*
 * A numeric field: octal, or GNU base-256 for values octal cannot hold
 * (top bit set; the next bit is the sign, and negative sizes are
 * nonsense). Values above INT64_MAX cannot be file offsets.
 */
static int parse_number(const unsigned char *p, size_t n, uint64_t *v)
{
	uint64_t x;
	int err;

	if (p[0] & 0x80) {
		if (p[0] & 0x40)
			return -ERANGE;
		x = p[0] & 0x3f;
		for (size_t i = 1; i < n; i++) {
			if (x > (UINT64_MAX >> 8))
				return -ERANGE;
			x = x << 8 | p[i];
		}
	} else {
		err = parse_octal(p, n, &x);
		if (err)
			return err;
	}
	if (x > INT64_MAX)
		return -ERANGE;
	*v = x;
	return 0;
}

/*
 * The checksum is the sum of the header's bytes with the checksum field
 * taken as spaces. Some historic tars summed signed chars; GNU tar
 * accepts either sum, and so do we.
 */
static bool checksum_ok(const unsigned char *b, uint64_t *stored,
			uint64_t *computed)
{
	uint64_t usum = 0;
	int64_t ssum = 0;

	for (unsigned i = 0; i < TAR_BLOCK; i++) {
		unsigned char c =
			i >= OFF_CHKSUM && i < OFF_CHKSUM + 8 ? ' ' : b[i];

		usum += c;
		ssum += (signed char)c;
	}
	*computed = usum;
	if (parse_octal(b + OFF_CHKSUM, 8, stored))
		return false;
	return *stored == usum || (ssum >= 0 && *stored == (uint64_t)ssum);
}

static bool is_ustar(const unsigned char *b)
{
	return !memcmp(b + OFF_MAGIC, "ustar", 6) &&
	       !memcmp(b + OFF_VERSION, "00", 2);
}

static bool is_gnu(const unsigned char *b)
{
	return !memcmp(b + OFF_MAGIC, "ustar ", 6) &&
	       !memcmp(b + OFF_VERSION, " ", 2);
}

bool tar_is_header(const void *blk)
{
	const unsigned char *b = blk;
	uint64_t stored, computed;

	if (is_zero(b) || (!is_ustar(b) && !is_gnu(b)))
		return false;
	return checksum_ok(b, &stored, &computed);
}

/*
 * A numeric field for an error message: it came from a corrupt header,
 * so show bytes outside printable ASCII as \ooo escapes.
 */
static const char *printable(const unsigned char *p, size_t n, char *out,
			     size_t cap)
{
	size_t k = 0;

	while (n && !p[n - 1])
		n--;
	for (size_t i = 0; i < n && k + 5 <= cap; i++) {
		if (p[i] >= ' ' && p[i] <= '~' && p[i] != '"' && p[i] != '\\')
			out[k++] = (char)p[i];
		else
			k += (size_t)snprintf(out + k, cap - k, "\\%03o", p[i]);
	}
	out[k] = '\0';
	return out;
}

/* Types that POSIX says store no data, whatever their size field says. */
static bool has_data(char type)
{
	return !(type >= '1' && type <= '6');
}

int tar_open(struct tar_reader **out, int fd, const char *name, struct diag *d)
{
	struct tar_reader *t;
	struct stat st;

	if (fstat(fd, &st))
		return diag_set(d, -errno, "%s: %s", name, strerror(errno));
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->name = strdup(name);
	if (!t->name) {
		free(t);
		return -ENOMEM;
	}
	t->fd = fd;
	t->fsize = st.st_size > 0 ? (uint64_t)st.st_size : 0;
	*out = t;
	return 0;
}

static void clear_pending(struct tar_reader *t)
{
	free(t->long_name);
	free(t->pax_path);
	t->long_name = NULL;
	t->pax_path = NULL;
	t->has_pax_size = false;
	t->pax_sparse = false;
	t->pending = false;
}

void tar_close(struct tar_reader *t)
{
	if (!t)
		return;
	clear_pending(t);
	free(t->name);
	free(t->path);
	free(t->meta);
	free(t);
}

/* Remember the end or an error, so that later calls repeat it. */
static int stop(struct tar_reader *t, int state, struct diag *d)
{
	/* Allocation failures come up without a message; give them one. */
	if (state == -ENOMEM)
		diag_set(d, state, "%s: out of memory", t->name);
	t->state = state;
	if (state < 0 && d)
		t->err = *d;
	return state;
}

/* Read the data of an 'L' or 'x' member (checked to lie in the file). */
static int read_meta(struct tar_reader *t, uint64_t hoff, uint64_t size,
		     struct diag *d)
{
	unsigned char *p;
	int err;

	if (size > TAR_META_MAX)
		return diag_set(d, LOADER_ETOOBIG,
				"%s: offset %" PRIu64
				": extended header of %" PRIu64
				" bytes (at most %u accepted)",
				t->name, hoff, size, TAR_META_MAX);
	if (size + 1 > t->meta_cap) {
		p = realloc(t->meta, size + 1);
		if (!p)
			return -ENOMEM;
		t->meta = p;
		t->meta_cap = size + 1;
	}
	err = fdio_pread_all(t->fd, t->meta, size, hoff + TAR_BLOCK);
	if (err)
		return diag_set(d, err, "%s: offset %" PRIu64 ": read: %s",
				t->name, hoff + TAR_BLOCK,
				loader_strerror(err));
	t->meta[size] = '\0';
	return 0;
}

static int set_string(char **dst, const void *src, size_t len)
{
	char *s = malloc(len + 1);

	if (!s)
		return -ENOMEM;
	memcpy(s, src, len);
	s[len] = '\0';
	free(*dst);
	*dst = s;
	return 0;
}

/*
 * Parse the records of a pax header: "LEN KEY=VALUE\n", LEN counting the
 * whole record. We need "path" and "size"; GNU.sparse.* marks a sparse
 * file, whose data is a map and not the file's bytes.
 */
static int parse_pax(struct tar_reader *t, uint64_t hoff, size_t len,
		     struct diag *d)
{
	const char *buf = (const char *)t->meta, *p = buf, *end = buf + len;
	uint64_t doff = hoff + TAR_BLOCK;

	while (p < end) {
		const char *q = p, *key, *eq, *val, *rec_end;
		uint64_t rlen = 0;
		int err;

		/* Writers may pad the header's data with NULs. */
		if (*p == '\0') {
			while (p < end && *p == '\0')
				p++;
			if (p == end)
				break;
			goto bad;
		}
		while (q < end && *q >= '0' && *q <= '9' && rlen <= len)
			rlen = rlen * 10 + (uint64_t)(*q++ - '0');
		if (q == p || q == end || *q != ' ' ||
		    rlen > (uint64_t)(end - p) || rlen < (uint64_t)(q - p) + 3)
			goto bad;
		rec_end = p + rlen;
		if (rec_end[-1] != '\n')
			goto bad;
		key = q + 1;
		eq = memchr(key, '=', (size_t)(rec_end - 1 - key));
		if (!eq || eq == key)
			goto bad;
		val = eq + 1;
		if ((size_t)(eq - key) == 4 && !memcmp(key, "path", 4)) {
			size_t vlen = (size_t)(rec_end - 1 - val);

			if (memchr(val, '\0', vlen))
				goto bad;
			if (vlen) {
				err = set_string(&t->pax_path, val, vlen);
				if (err)
					return err;
			} else {
				/* An empty value cancels the keyword. */
				free(t->pax_path);
				t->pax_path = NULL;
			}
		} else if ((size_t)(eq - key) == 4 && !memcmp(key, "size", 4)) {
			uint64_t v = 0;
			const char *c = val;

			for (; c < rec_end - 1 && *c >= '0' && *c <= '9'; c++) {
				if (v > (INT64_MAX - 9) / 10)
					goto bad;
				v = v * 10 + (uint64_t)(*c - '0');
			}
			if (c == val || c != rec_end - 1)
				goto bad;
			t->pax_size = v;
			t->has_pax_size = true;
		} else if (eq - key > 11 && !memcmp(key, "GNU.sparse.", 11)) {
			t->pax_sparse = true;
		}
		p = rec_end;
		continue;
	bad:
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: offset %" PRIu64
			": malformed pax record in the extended header at offset %" PRIu64,
			t->name, doff + (uint64_t)(p - buf), hoff);
	}
	return 0;
}

/* The name a plain header gives: ustar prefix "/" name, or name alone. */
static int header_name(struct tar_reader *t, const unsigned char *b)
{
	size_t nlen = strnlen((const char *)b + OFF_NAME, 100);
	size_t plen =
		is_ustar(b) ? strnlen((const char *)b + OFF_PREFIX, 155) : 0;
	size_t need = plen + 1 + nlen + 1;
	char *p;

	if (need > t->path_cap) {
		p = realloc(t->path, need);
		if (!p)
			return -ENOMEM;
		t->path = p;
		t->path_cap = need;
	}
	p = t->path;
	if (plen) {
		memcpy(p, b + OFF_PREFIX, plen);
		p += plen;
		*p++ = '/';
	}
	memcpy(p, b + OFF_NAME, nlen);
	p[nlen] = '\0';
	return 0;
}

static int take_name(struct tar_reader *t, const char *s)
{
	size_t need = strlen(s) + 1;
	char *p;

	if (need > t->path_cap) {
		p = realloc(t->path, need);
		if (!p)
			return -ENOMEM;
		t->path = p;
		t->path_cap = need;
	}
	memcpy(t->path, s, need);
	return 0;
}

/*
 * Old GNU sparse members ('S') may carry extension blocks of sparse map
 * after the header, before the data; step over them.
 */
static int skip_sparse_ext(struct tar_reader *t, const unsigned char *b,
			   uint64_t hoff, uint64_t *data_off, struct diag *d)
{
	unsigned char ext[TAR_BLOCK];
	bool more = b[OFF_ISEXT] != 0;
	int err;

	while (more) {
		if (t->fsize - *data_off < TAR_BLOCK)
			return diag_set(
				d, LOADER_ETRUNC,
				"%s: offset %" PRIu64
				": truncated: the file ends inside the sparse map of the member at offset %" PRIu64,
				t->name, *data_off, hoff);
		err = fdio_pread_all(t->fd, ext, TAR_BLOCK, *data_off);
		if (err)
			return diag_set(
				d, err, "%s: offset %" PRIu64 ": read: %s",
				t->name, *data_off, loader_strerror(err));
		more = ext[OFF_EXT_ISEXT] != 0;
		*data_off += TAR_BLOCK;
	}
	return 0;
}

/* A zero block at hoff: the end, if a second one or the end of file follows. */
static int zero_block(struct tar_reader *t, uint64_t hoff, struct diag *d)
{
	unsigned char b[TAR_BLOCK];
	uint64_t next = hoff + TAR_BLOCK;
	int err;

	if (t->pending)
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: offset %" PRIu64
			": the extended header at offset %" PRIu64
			" is followed by the end of the archive, not a member",
			t->name, hoff, t->pending_off);
	if (next == t->fsize)
		return 0;
	if (t->fsize - next < TAR_BLOCK)
		return diag_set(d, LOADER_ETRUNC,
				"%s: offset %" PRIu64 ": truncated: %" PRIu64
				" bytes after a zero block, not a whole block",
				t->name, next, t->fsize - next);
	err = fdio_pread_all(t->fd, b, TAR_BLOCK, next);
	if (err)
		return diag_set(d, err, "%s: offset %" PRIu64 ": read: %s",
				t->name, next, loader_strerror(err));
	if (!is_zero(b))
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: offset %" PRIu64
			": a lone zero block is followed by more headers",
			t->name, hoff);
	return 0;
}

int tar_next(struct tar_reader *t, struct tar_member *m, struct diag *d)
{
	unsigned char b[TAR_BLOCK];
	uint64_t hoff, size, data_off, dlen, padded, stored, computed;
	char type, text[4 * 12 + 1];
	int err;

	if (t->state) {
		if (t->state < 0 && d)
			*d = t->err;
		return t->state;
	}
	for (;;) {
		hoff = t->off;
		if (hoff == t->fsize) {
			/* End of file at a block boundary: no zero blocks. */
			if (t->pending)
				return stop(
					t,
					diag_set(
						d, LOADER_ETRUNC,
						"%s: offset %" PRIu64
						": truncated: the file ends after the extended header at offset %" PRIu64,
						t->name, hoff, t->pending_off),
					d);
			t->state = 1;
			return 0;
		}
		if (t->fsize - hoff < TAR_BLOCK)
			return stop(
				t,
				diag_set(
					d, LOADER_ETRUNC,
					"%s: offset %" PRIu64
					": truncated: the file ends inside a header (%" PRIu64
					" of %u bytes)",
					t->name, hoff, t->fsize - hoff,
					TAR_BLOCK),
				d);
		err = fdio_pread_all(t->fd, b, TAR_BLOCK, hoff);
		if (err)
			return stop(t,
				    diag_set(d, err,
					     "%s: offset %" PRIu64 ": read: %s",
					     t->name, hoff,
					     loader_strerror(err)),
				    d);
		if (is_zero(b)) {
			err = zero_block(t, hoff, d);
			if (err)
				return stop(t, err, d);
			t->state = 1;
			return 0;
		}
		if (!checksum_ok(b, &stored, &computed))
			return stop(
				t,
				diag_set(
					d, LOADER_ECHECKSUM,
					"%s: offset %" PRIu64
					": bad tar header checksum (stored \"%s\", computed %06" PRIo64
					", octal)",
					t->name, hoff,
					printable(b + OFF_CHKSUM, 8, text,
						  sizeof(text)),
					computed),
				d);
		type = b[OFF_TYPE] ? (char)b[OFF_TYPE] : TAR_REG;
		if (parse_number(b + OFF_SIZE, 12, &size))
			return stop(
				t,
				diag_set(
					d, LOADER_EFORMAT,
					"%s: offset %" PRIu64
					": bad size field \"%s\" in tar header",
					t->name, hoff + OFF_SIZE,
					printable(b + OFF_SIZE, 12, text,
						  sizeof(text))),
				d);
		data_off = hoff + TAR_BLOCK;
		if (type == 'S') {
			err = skip_sparse_ext(t, b, hoff, &data_off, d);
			if (err)
				return stop(t, err, d);
		}
		/* pax "size" replaces the size field of the member it precedes. */
		if (t->has_pax_size && type != 'x' && type != 'g' &&
		    type != 'L' && type != 'K')
			size = t->pax_size;
		dlen = has_data(type) ? size : 0;
		padded = (dlen + TAR_BLOCK - 1) & ~(uint64_t)(TAR_BLOCK - 1);
		/* The data and its padding must lie inside the file. */
		if (padded > t->fsize - data_off) {
			err = header_name(t, b);
			if (err)
				return stop(t, err, d);
			return stop(
				t,
				diag_set(
					d, LOADER_ETRUNC,
					"%s: offset %" PRIu64
					": truncated: member \"%s\" has %" PRIu64
					" data bytes at offset %" PRIu64
					" (%" PRIu64
					" padded), the file has only %" PRIu64
					" more",
					t->name, hoff, t->path, dlen, data_off,
					padded, t->fsize - data_off),
				d);
		}
		t->off = data_off + padded;
		switch (type) {
		case 'L':
		case 'x':
			err = read_meta(t, hoff, dlen, d);
			if (!err && type == 'L') {
				size_t n = strnlen((char *)t->meta, dlen);

				err = set_string(&t->long_name, t->meta, n);
			} else if (!err) {
				err = parse_pax(t, hoff, (size_t)dlen, d);
			}
			if (err)
				return stop(t, err, d);
			if (!t->pending)
				t->pending_off = hoff;
			t->pending = true;
			continue;
		case 'K':
		case 'g':
			/* Long link names, global pax headers: not needed. */
			continue;
		}
		/* pax overrides a GNU long name, which overrides the header. */
		if (t->pax_path)
			err = take_name(t, t->pax_path);
		else if (t->long_name)
			err = take_name(t, t->long_name);
		else
			err = header_name(t, b);
		if (err)
			return stop(t, err, d);
		m->header_off = t->pending ? t->pending_off : hoff;
		if (t->pax_sparse)
			type = 'S';
		clear_pending(t);
		m->name = t->path;
		m->name_len = strlen(t->path);
		if (!m->name_len)
			return stop(t,
				    diag_set(d, LOADER_EFORMAT,
					     "%s: offset %" PRIu64
					     ": member with an empty name",
					     t->name, hoff),
				    d);
		/* Old tars mark directories only by a trailing slash. */
		if (type == TAR_REG && t->path[m->name_len - 1] == '/')
			type = TAR_DIR;
		m->type = type;
		m->size = dlen;
		m->data_off = data_off;
		return 1;
	}
}
