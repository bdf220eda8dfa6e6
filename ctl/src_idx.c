/*
 * src_idx.c - MNIST-style IDX files (gzipped or not) as a pack source.
 *
 * A directory holds pairs PREFIX-images-idx3-ubyte[.gz] and
 * PREFIX-labels-idx1-ubyte[.gz]; each pair is a split ("t10k" is called
 * "test", as the MNIST family means it). Images become a tensor field
 * "image" of the file's dtype and shape, labels an int64 field "label".
 * IDX files are small by nature (Fashion-MNIST is 47 MB unpacked), so
 * a split is read whole into memory.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <zlib.h>

#include "loader_error.h"
#include "source.h"

struct idx_file {
	unsigned char *data; /* payload after the header */
	uint64_t n;	     /* first dimension */
	uint64_t item;	     /* bytes per item */
	unsigned dtype;
	uint32_t ndim;
	uint32_t dims[4]; /* dims after the first */
};

struct idx_source {
	struct source base;
	struct idx_file img, lab;
	unsigned char label[8]; /* little-endian int64 */
};

/* IDX type codes and our dtypes. */
static unsigned idx_dtype(unsigned code)
{
	switch (code) {
	case 0x08: return DT_U8;
	case 0x09: return DT_I8;
	case 0x0b: return DT_I16;
	case 0x0c: return DT_I32;
	case 0x0d: return DT_F32;
	case 0x0e: return DT_F64;
	}
	return DT_NONE;
}

/* "train-images-idx3-ubyte.gz" -> prefix "train"; NULL if not an image file. */
static bool image_prefix(const char *name, char *prefix, size_t n)
{
	const char *p = strstr(name, "-images-idx3-ubyte");

	if (!p || (strcmp(p, "-images-idx3-ubyte") &&
		   strcmp(p, "-images-idx3-ubyte.gz")))
		return false;
	if ((size_t)(p - name) >= n || p == name)
		return false;
	memcpy(prefix, name, (size_t)(p - name));
	prefix[p - name] = '\0';
	return true;
}

static const char *split_name(const char *prefix)
{
	return !strcmp(prefix, "t10k") ? "test" : prefix;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(a, b);
}

static bool idx_detect(const char *path)
{
	DIR *dir = opendir(path);
	struct dirent *e;
	char prefix[64];
	bool found = false;

	if (!dir)
		return false;
	while (!found && (e = readdir(dir)))
		found = image_prefix(e->d_name, prefix, sizeof(prefix));
	closedir(dir);
	return found;
}

static int idx_splits(const char *path, char (*names)[32], unsigned max,
		      struct diag *d)
{
	DIR *dir = opendir(path);
	struct dirent *e;
	char prefix[64];
	unsigned n = 0;

	if (!dir)
		return diag_set(d, -errno, "%s: %s", path, strerror(errno));
	while ((e = readdir(dir))) {
		const char *s;
		bool dup = false;

		if (!image_prefix(e->d_name, prefix, sizeof(prefix)))
			continue;
		s = split_name(prefix);
		for (unsigned k = 0; k < n; k++)
			dup |= !strcmp(names[k], s);
		if (dup || strlen(s) >= 32)
			continue;
		if (n == max) {
			closedir(dir);
			return diag_set(d, LOADER_ETOOBIG,
					"%s: more than %u IDX splits", path,
					max);
		}
		snprintf(names[n++], 32, "%s", s);
	}
	closedir(dir);
	qsort(names, n, 32, cmp_names);
	if (!n)
		return diag_set(d, -ENOENT,
				"%s: no *-images-idx3-ubyte[.gz] files", path);
	return (int)n;
}

/* Find "DIR/PREFIX-KIND-idxN-ubyte" with or without .gz. */
static int find_file(const char *dir, const char *prefix, const char *kind,
		     char *path, size_t n)
{
	static const char *const ext[] = { ".gz", "" };
	struct stat st;

	for (unsigned i = 0; i < 2; i++) {
		snprintf(path, n, "%s/%s-%s-ubyte%s", dir, prefix, kind,
			 ext[i]);
		if (!stat(path, &st))
			return 0;
	}
	return -ENOENT;
}

static int read_idx(const char *path, struct idx_file *f, struct diag *d)
{
	gzFile gz = gzopen(path, "rb");
	unsigned char hdr[4], dim[4];
	uint64_t total, cap, len = 0, n;
	int r, err = 0;

	if (!gz)
		return diag_set(d, errno ? -errno : -ENOMEM, "%s: %s", path,
				strerror(errno));
	gzbuffer(gz, 1 << 20);
	if (gzread(gz, hdr, 4) != 4 || hdr[0] || hdr[1]) {
		err = diag_set(
			d, LOADER_EFORMAT,
			"%s: offset 0: not an IDX file (magic 00 00 TYPE NDIM)",
			path);
		goto out;
	}
	f->dtype = idx_dtype(hdr[2]);
	f->ndim = hdr[3];
	if (!f->dtype || f->ndim < 1 || f->ndim > 5) {
		err = diag_set(
			d, LOADER_EFORMAT,
			"%s: offset 2: IDX type %#x with %u dimensions is not supported",
			path, hdr[2], hdr[3]);
		goto out;
	}
	total = dtype_size(f->dtype);
	f->item = total;
	for (uint32_t i = 0; i < f->ndim; i++) {
		if (gzread(gz, dim, 4) != 4) {
			err = diag_set(d, LOADER_ETRUNC,
				       "%s: offset %u: truncated IDX header",
				       path, 4 + 4 * i);
			goto out;
		}
		n = (uint64_t)dim[0] << 24 | (uint64_t)dim[1] << 16 |
		    (uint64_t)dim[2] << 8 | dim[3];
		if (n == 0 || n > (1ull << 32) || total > (1ull << 40) / n) {
			err = diag_set(
				d, LOADER_EFORMAT,
				"%s: offset %u: dimension %u is %" PRIu64, path,
				4 + 4 * i, i, n);
			goto out;
		}
		total *= n;
		if (i == 0) {
			f->n = n;
		} else {
			f->dims[i - 1] = (uint32_t)n;
			f->item *= n;
		}
	}
	f->ndim--;
	cap = total + 1;
	f->data = malloc(cap);
	if (!f->data) {
		err = diag_set(d, -ENOMEM, "%s: %" PRIu64 " bytes", path,
			       total);
		goto out;
	}
	/* Read one byte more than expected to notice trailing garbage. */
	while (len < cap) {
		unsigned chunk = cap - len > (1u << 30) ? 1u << 30 :
							  (unsigned)(cap - len);

		r = gzread(gz, f->data + len, chunk);
		if (r < 0) {
			int zerr;

			err = diag_set(d, LOADER_EDECODE, "%s: %s", path,
				       gzerror(gz, &zerr));
			goto out;
		}
		if (r == 0)
			break;
		len += (uint64_t)r;
	}
	if (len != total)
		err = diag_set(d, len < total ? LOADER_ETRUNC : LOADER_EFORMAT,
			       "%s: header promises %" PRIu64
			       " data bytes, file has %s%" PRIu64,
			       path, total, len > total ? "more than " : "",
			       len > total ? total : len);
out:
	gzclose(gz);
	return err;
}

static int idx_open(struct source **out, const char *path,
		    const struct source_opts *o, struct diag *d)
{
	char ipath[4096], lpath[4096];
	const char *prefix =
		o->split && strcmp(o->split, "test") ? o->split : "t10k";
	struct idx_source *s;
	struct field *f;
	int err;

	if (!o->split)
		return diag_set(d, -EINVAL, "%s: IDX needs a split", path);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = &source_idx_ops;
	if (find_file(path, prefix, "images-idx3", ipath, sizeof(ipath)) ||
	    find_file(path, prefix, "labels-idx1", lpath, sizeof(lpath))) {
		err = diag_set(
			d, -ENOENT,
			"%s: split %s needs %s-images-idx3-ubyte[.gz] and %s-labels-idx1-ubyte[.gz]",
			path, o->split, prefix, prefix);
		goto fail;
	}
	err = read_idx(ipath, &s->img, d);
	if (!err)
		err = read_idx(lpath, &s->lab, d);
	if (err)
		goto fail;
	if (s->lab.ndim != 0 || s->lab.dtype == DT_F32 ||
	    s->lab.dtype == DT_F64 || s->lab.n != s->img.n) {
		err = diag_set(
			d, LOADER_EFORMAT,
			"%s: %" PRIu64
			" integer labels expected (one per image), found %" PRIu64
			" items of %u dimensions",
			lpath, s->img.n, s->lab.n, s->lab.ndim + 1);
		goto fail;
	}
	/*
	 * IDX stores multi-byte values big-endian and tensors are
	 * little-endian; until a byte-swapping path exists, take 8-bit images.
	 */
	if (s->img.dtype != DT_U8 && s->img.dtype != DT_I8) {
		err = diag_set(
			d, -ENOTSUP,
			"%s: IDX images of %s are not supported (8-bit only)",
			ipath, dtype_name(s->img.dtype));
		goto fail;
	}
	if (s->img.ndim > SCHEMA_MAX_DIMS) {
		err = diag_set(d, LOADER_EFORMAT, "%s: too many dimensions",
			       ipath);
		goto fail;
	}
	s->base.count = s->img.n;
	s->base.schema.nfields = 2;
	f = &s->base.schema.f[0];
	snprintf(f->name, sizeof(f->name), "image");
	f->kind = FIELD_TENSOR;
	f->dtype = (uint8_t)s->img.dtype;
	f->ndim = (uint8_t)s->img.ndim;
	memcpy(f->dims, s->img.dims, sizeof(f->dims));
	f = &s->base.schema.f[1];
	snprintf(f->name, sizeof(f->name), "label");
	f->kind = FIELD_TENSOR;
	f->dtype = DT_I64;
	if (o->classes) {
		err = source_parse_classes(o->classes, &s->base.classes,
					   &s->base.nclasses);
		if (err)
			goto fail;
	}
	*out = &s->base;
	return 0;
fail:
	free(s->img.data);
	free(s->lab.data);
	free(s);
	return err;
}

static int64_t label_at(const struct idx_file *f, uint64_t i)
{
	const unsigned char *p = f->data + i * f->item;

	switch (f->dtype) {
	case DT_U8: return p[0];
	case DT_I8: return (int8_t)p[0];
	case DT_I16: return (int16_t)(p[0] << 8 | p[1]);
	default:
		return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
				 (uint32_t)p[2] << 8 | p[3]);
	}
}

static int idx_get(struct source *base, uint64_t i, struct codec_ctx *ctx,
		   struct shard_field *f, char *where, size_t wn,
		   struct diag *d)
{
	struct idx_source *s = (struct idx_source *)base;
	uint64_t v;

	snprintf(where, wn, "IDX item %" PRIu64, i);
	if (i >= base->count)
		return diag_set(d, LOADER_ERANGE, "IDX item %" PRIu64, i);
	f[0].data = s->img.data + i * s->img.item;
	f[0].len = (uint32_t)s->img.item;
	f[0].raw_len = f[0].len;
	v = (uint64_t)label_at(&s->lab, i);
	for (unsigned k = 0; k < 8; k++)
		s->label[k] = (unsigned char)(v >> (8 * k));
	f[1].data = s->label;
	f[1].len = sizeof(s->label);
	f[1].raw_len = f[1].len;
	return 0;
}

static uint64_t idx_bytes_in(const struct source *base)
{
	const struct idx_source *s = (const struct idx_source *)base;

	return s->img.n * s->img.item + s->lab.n * s->lab.item;
}

static void idx_close(struct source *base)
{
	struct idx_source *s = (struct idx_source *)base;

	if (!s)
		return;
	source_free_classes(base->classes, base->nclasses);
	free(s->img.data);
	free(s->lab.data);
	free(s);
}

const struct source_ops source_idx_ops = {
	.name = "idx",
	.detect = idx_detect,
	.splits = idx_splits,
	.open = idx_open,
	.get = idx_get,
	.bytes_in = idx_bytes_in,
	.close = idx_close,
};
