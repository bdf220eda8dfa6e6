/*
 * src_tar.c - a WebDataset-style tar file as a pack source.
 *
 * WebDataset stores a sample as consecutive tar members that share a
 * key: "dir/0001.jpg", "dir/0001.cls" and "dir/0001.txt" are the fields
 * jpg, cls and txt of sample "dir/0001". The key is the member path up
 * to the first dot of its base name, the extension is everything after
 * that dot ("a.seg.png" is field "seg.png" of key "a").
 *
 * Opening scans the headers once (no data is read) and records where
 * each member of each sample lies; get() then reads a sample's members
 * with pread, so samples can be taken in any order.
 *
 * As WebDataset does, we skip members that cannot be fields: anything
 * but regular files, base names that start with a dot (".DS_Store",
 * "._x.jpg" from macOS) and base names without an extension. Also as
 * WebDataset does, extensions are compared in lower case, so "x.JPG" and
 * "y.jpg" are the same field "jpg".
 *
 * Members named .npy become tensor fields: the first sample's header
 * gives dtype and shape, every other sample's must say the same, and
 * the field holds the array's bytes (little-endian, C order) without
 * the header. Labels (.cls and the like) become int64 fields; anything
 * else stays bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdio.h"
#include "loader_error.h"
#include "npy.h"
#include "source.h"
#include "tar.h"

#define EXT_MAX SCHEMA_NAME_MAX
/* Longest text an integer field may hold ("  -9223372036854775808\n"). */
#define INT_TEXT_MAX 64

/* Where one member of a sample lies, in schema order per sample. */
struct tar_item {
	uint64_t off; /* data offset in the tar */
	uint32_t len;
	uint16_t spell; /* the extension as written: spell[] */
};

/* A member of the sample being scanned. */
struct scan_member {
	char ext[EXT_MAX + 1]; /* lower case */
	uint16_t spell;
	uint64_t off;
	uint32_t len;
};

struct tar_source {
	struct source base;
	char *path;
	int fd;
	/* Per field: its extension in lower case, as the schema orders them. */
	char ext[SCHEMA_MAX_FIELDS][EXT_MAX + 1];
	/* Every spelling of an extension met in the tar (for messages). */
	char (*spell)[EXT_MAX + 1];
	unsigned nspell;
	/* Sample keys, NUL-terminated, back to back in one arena. */
	char *keys;
	size_t keys_len, keys_cap;
	uint64_t *key_off;	/* per sample */
	struct tar_item *items; /* count * nfields */
	uint64_t cap;		/* samples that key_off and items hold */
	unsigned char *buf;	/* the payloads of the last get() */
	size_t buf_cap;
	unsigned char ints[SCHEMA_MAX_FIELDS][8];
	uint8_t conv[SCHEMA_MAX_FIELDS]; /* enum conv: what get() does */
	uint64_t bytes_in;
	char *ragged; /* source_opts.ragged, or NULL */
};

/* What a field's members become. */
enum conv { CONV_AS_IS, CONV_INT_TEXT, CONV_NPY };

/* State of the one scan in open(). */
struct scan {
	struct tar_source *s;
	/* Open addressing over sample indexes + 1, to find repeated keys. */
	uint64_t *hash;
	size_t hash_cap;
	/* The sample being collected: its members and first header. */
	struct scan_member m[SCHEMA_MAX_FIELDS];
	unsigned nm;
	bool open;
	uint64_t first_off;
};

/* Extensions whose members hold a decimal integer (WebDataset labels). */
static const char *const int_exts[] = {
	"cls", "cls2", "label", "index", "idx", NULL,
};

static const char *const jpeg_exts[] = { "jpg", "jpeg", NULL };

static bool in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (!strcmp(*list, s))
			return true;
	return false;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

static bool tar_detect(const char *path)
{
	unsigned char blk[TAR_BLOCK];
	struct stat st;
	bool ok;
	int fd;

	if (stat(path, &st) || !S_ISREG(st.st_mode))
		return false;
	if (ends_with(path, ".tar"))
		return true;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ok = !fdio_pread_all(fd, blk, sizeof(blk), 0) && tar_is_header(blk);
	close(fd);
	return ok;
}

static const char *key_of(const struct tar_source *s, uint64_t i)
{
	return s->keys + s->key_off[i];
}

static uint64_t hash_str(const char *p)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
	return h;
}

/* The slot of key in the table: its sample + 1, or the empty slot for it. */
static uint64_t *hash_slot(struct scan *sc, const char *key)
{
	size_t mask = sc->hash_cap - 1, i = hash_str(key) & mask;

	while (sc->hash[i] && strcmp(key_of(sc->s, sc->hash[i] - 1), key))
		i = (i + 1) & mask;
	return &sc->hash[i];
}

/* Keep the table at most half full. */
static int hash_grow(struct scan *sc, uint64_t count)
{
	uint64_t *old = sc->hash;
	size_t old_cap = sc->hash_cap;

	if (old_cap && count < old_cap / 2)
		return 0;
	sc->hash_cap = old_cap ? old_cap * 2 : 1024;
	sc->hash = calloc(sc->hash_cap, sizeof(*sc->hash));
	if (!sc->hash) {
		sc->hash = old;
		sc->hash_cap = old_cap;
		return -ENOMEM;
	}
	for (size_t i = 0; i < old_cap; i++)
		if (old[i])
			*hash_slot(sc, key_of(sc->s, old[i] - 1)) = old[i];
	free(old);
	return 0;
}

/* Index of the spelling of an extension, added if new. */
static int intern_spell(struct tar_source *s, const char *ext, uint16_t *out)
{
	void *p;

	for (unsigned i = 0; i < s->nspell; i++) {
		if (!strcmp(s->spell[i], ext)) {
			*out = (uint16_t)i;
			return 0;
		}
	}
	if (s->nspell == UINT16_MAX + 1u)
		return LOADER_ETOOBIG;
	p = realloc(s->spell, (s->nspell + 1) * sizeof(*s->spell));
	if (!p)
		return -ENOMEM;
	s->spell = p;
	snprintf(s->spell[s->nspell], EXT_MAX + 1, "%s", ext);
	*out = (uint16_t)s->nspell++;
	return 0;
}

static int cmp_members(const void *a, const void *b)
{
	return strcmp(((const struct scan_member *)a)->ext,
		      ((const struct scan_member *)b)->ext);
}

/* The schema's dtype of a .npy array's elements; DT_NONE if none fits. */
static uint8_t npy_dtype(const struct npy_info *n)
{
	static const struct {
		char kind;
		uint32_t size;
		uint8_t dt;
	} map[] = {
		{ 'b', 1, DT_U8 },  { 'u', 1, DT_U8 },	{ 'i', 1, DT_I8 },
		{ 'u', 2, DT_U16 }, { 'i', 2, DT_I16 }, { 'u', 4, DT_U32 },
		{ 'i', 4, DT_I32 }, { 'u', 8, DT_U64 }, { 'i', 8, DT_I64 },
		{ 'f', 2, DT_F16 }, { 'f', 4, DT_F32 }, { 'f', 8, DT_F64 },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].kind == n->kind && map[i].size == n->itemsize)
			return map[i].dt;
	return DT_NONE;
}

/* "(3, 4)": a shape for messages. */
static void shape_text(const uint64_t *dims, uint32_t ndim, char *out, size_t n)
{
	size_t k = (size_t)snprintf(out, n, "(");

	for (uint32_t i = 0; i < ndim && k < n; i++)
		k += (size_t)snprintf(out + k, n - k, "%s%llu", i ? ", " : "",
				      (unsigned long long)dims[i]);
	if (k < n)
		snprintf(out + k, n - k, ")");
}

/*
 * Read and parse the .npy header of the member at off (len bytes) into
 * info, checking that len is exactly header and array. where names the
 * member for d.
 */
static int read_npy_header(int fd, uint64_t off, uint32_t len,
			   struct npy_info *info, const char *where,
			   struct diag *d)
{
	unsigned char hdr[NPY_HEADER_MAX + 16];
	size_t n = len < sizeof(hdr) ? len : sizeof(hdr);
	int err = fdio_pread_all(fd, hdr, n, off);

	if (!err)
		err = npy_parse(hdr, n, info, d);
	if (err == LOADER_ETRUNC)
		return diag_set(d, err, "%s: read: the tar file shrank", where);
	if (!err)
		err = npy_check_size(info, len, d);
	if (err)
		return diag_wrap(d, err, "%s", where);
	return 0;
}

/* A tensor field from the first sample's .npy member. */
static int npy_field(struct tar_source *s, const struct scan_member *m,
		     struct field *f, struct diag *d)
{
	struct npy_info n;
	char where[256], shape[128];
	int err;

	snprintf(where, sizeof(where), "%s: member %s.%s at offset %" PRIu64,
		 s->path, key_of(s, 0), s->spell[m->spell], m->off);
	err = read_npy_header(s->fd, m->off, m->len, &n, where, d);
	if (err)
		return err;
	shape_text(n.dims, n.ndim, shape, sizeof(shape));
	if (n.fortran)
		return diag_set(
			d, -ENOTSUP,
			"%s: a Fortran-order array (save it with np.ascontiguousarray)",
			where);
	f->kind = FIELD_TENSOR;
	f->dtype = npy_dtype(&n);
	if (n.ndim > SCHEMA_MAX_DIMS)
		return diag_set(d, -ENOTSUP,
				"%s: shape %s has more than %d dimensions",
				where, shape, SCHEMA_MAX_DIMS);
	f->ndim = (uint8_t)n.ndim;
	for (uint32_t i = 0; i < n.ndim; i++) {
		if (n.dims[i] == 0 || n.dims[i] > UINT32_MAX)
			return diag_set(
				d, -ENOTSUP,
				"%s: shape %s: a dimension of 0 or above 2^32",
				where, shape);
		f->dims[i] = (uint32_t)n.dims[i];
	}
	return 0;
}

/* Is name one of the comma-separated names of list (NULL: none)? */
static bool in_csv(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);

		if (l == n && !memcmp(p, name, n))
			return true;
		p = e ? e + 1 : p + l;
	}
	return false;
}

/* Every name of --ragged must be a ragged tensor of the schema now. */
static int check_ragged(const struct tar_source *s, struct diag *d)
{
	const struct schema *sch = &s->base.schema;

	for (const char *p = s->ragged; p && *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		int k = -1;

		for (unsigned i = 0; i < sch->nfields && k < 0; i++)
			if (strlen(sch->f[i].name) == l &&
			    !memcmp(sch->f[i].name, p, l))
				k = (int)i;
		if (k < 0 || !field_ragged(&sch->f[k]))
			return diag_set(
				d, LOADER_EUSAGE, "--ragged %.*s: %s", (int)l,
				p,
				k < 0 ? "no such field in the tar (its fields are its member extensions)" :
					"not a .npy field (bytes fields are ragged already)");
		p = e ? e + 1 : p + l;
	}
	return 0;
}

/* The schema, from the first sample's extensions (sorted already). */
static int make_schema(struct tar_source *s, struct scan *sc, struct diag *d)
{
	struct schema *sch = &s->base.schema;

	sch->nfields = sc->nm;
	for (unsigned k = 0; k < sc->nm; k++) {
		struct field *f = &sch->f[k];
		const char *ext = sc->m[k].ext;

		memcpy(s->ext[k], ext, sizeof(s->ext[k]));
		memset(f, 0, sizeof(*f));
		/* Field names allow [A-Za-z0-9_.-]; anything else is '_'. */
		for (size_t i = 0; ext[i]; i++) {
			char c = ext[i];
			bool ok = (c >= 'a' && c <= 'z') ||
				  (c >= 'A' && c <= 'Z') ||
				  (c >= '0' && c <= '9') || c == '_' ||
				  c == '.' || c == '-';

			f->name[i] = ok ? c : '_';
		}
		s->conv[k] = CONV_AS_IS;
		if (in_list(jpeg_exts, ext)) {
			f->kind = FIELD_JPEG;
		} else if (in_list(int_exts, ext)) {
			f->kind = FIELD_TENSOR;
			f->dtype = DT_I64;
			s->conv[k] = CONV_INT_TEXT;
		} else if (!strcmp(ext, "npy") || ends_with(ext, ".npy")) {
			int err = npy_field(s, &sc->m[k], f, d);

			if (err)
				return err;
			s->conv[k] = CONV_NPY;
			if (in_csv(s->ragged, f->name)) {
				if (!f->ndim)
					return diag_set(
						d, LOADER_EUSAGE,
						"--ragged %s: the first sample's array is a scalar: nothing to vary",
						f->name);
				f->dims[0] = 0; /* "*" */
			}
		} else {
			f->kind = FIELD_BYTES;
		}
		for (unsigned j = 0; j < k; j++)
			if (!strcmp(sch->f[j].name, f->name))
				return diag_set(
					d, LOADER_ESCHEMA,
					"%s: offset %" PRIu64
					": sample \"%s\": extensions \"%s\" and \"%s\" both become field \"%s\"",
					s->path, sc->first_off, key_of(s, 0),
					s->ext[j], ext, f->name);
	}
	return 0;
}

/*
 * Close the sample being collected: the first one sets the schema, every
 * later one must have exactly its extensions.
 */
static int finish_sample(struct scan *sc, struct diag *d)
{
	struct tar_source *s = sc->s;
	struct schema *sch = &s->base.schema;
	uint64_t n = s->base.count;
	struct tar_item *it;
	unsigned k;
	int err;

	if (!sc->open)
		return 0;
	sc->open = false;
	qsort(sc->m, sc->nm, sizeof(sc->m[0]), cmp_members);
	if (n == 0) {
		err = make_schema(s, sc, d);
		if (!err)
			err = check_ragged(s, d);
		if (err)
			return err;
	}
	/* Both lists are sorted: the first difference is what is wrong. */
	for (k = 0; k < sch->nfields && k < sc->nm; k++)
		if (strcmp(s->ext[k], sc->m[k].ext))
			break;
	if (k < sch->nfields || k < sc->nm) {
		bool missing =
			k == sc->nm || (k < sch->nfields &&
					strcmp(s->ext[k], sc->m[k].ext) < 0);

		if (missing)
			return diag_set(
				d, LOADER_ESCHEMA,
				"%s: offset %" PRIu64
				": sample \"%s\" has no .%s member (the first sample, \"%s\", has one)",
				s->path, sc->first_off, key_of(s, n), s->ext[k],
				key_of(s, 0));
		return diag_set(
			d, LOADER_ESCHEMA,
			"%s: offset %" PRIu64
			": sample \"%s\" has an extra member \"%s.%s\" (the first sample, \"%s\", has no .%s)",
			s->path, sc->first_off, key_of(s, n), key_of(s, n),
			s->spell[sc->m[k].spell], key_of(s, 0), sc->m[k].ext);
	}
	if (!s->items) {
		s->items = calloc(s->cap * sch->nfields, sizeof(*s->items));
		if (!s->items)
			return -ENOMEM;
	}
	it = s->items + n * sch->nfields;
	for (k = 0; k < sc->nm; k++)
		it[k] = (struct tar_item){ sc->m[k].off, sc->m[k].len,
					   sc->m[k].spell };
	s->base.count = n + 1;
	return 0;
}

/* Make room for one more sample's key offset and items. */
static int grow_samples(struct tar_source *s)
{
	uint64_t n = s->base.count, cap;
	size_t nf = s->base.schema.nfields;
	void *p;

	if (n < s->cap)
		return 0;
	cap = s->cap ? s->cap * 2 : 1024;
	p = realloc(s->key_off, cap * sizeof(*s->key_off));
	if (!p)
		return -ENOMEM;
	s->key_off = p;
	if (s->items) {
		p = realloc(s->items, cap * nf * sizeof(*s->items));
		if (!p)
			return -ENOMEM;
		s->items = p;
	}
	s->cap = cap;
	return 0;
}

/* Begin sample n with key (klen bytes of name), checking it is new. */
static int start_sample(struct scan *sc, const char *name, size_t klen,
			uint64_t hoff, struct diag *d)
{
	struct tar_source *s = sc->s;
	uint64_t n = s->base.count, *slot;
	int err;

	err = grow_samples(s);
	if (!err)
		err = hash_grow(sc, n + 1);
	if (err)
		return err;
	if (s->keys_len + klen + 1 > s->keys_cap) {
		size_t cap = s->keys_cap ? s->keys_cap : 65536;
		char *p;

		while (cap < s->keys_len + klen + 1)
			cap *= 2;
		p = realloc(s->keys, cap);
		if (!p)
			return -ENOMEM;
		s->keys = p;
		s->keys_cap = cap;
	}
	memcpy(s->keys + s->keys_len, name, klen);
	s->keys[s->keys_len + klen] = '\0';
	s->key_off[n] = s->keys_len;
	slot = hash_slot(sc, key_of(s, n));
	if (*slot)
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: offset %" PRIu64
			": key \"%s\" appears again after other samples (the members of a sample must be consecutive)",
			s->path, hoff, key_of(s, n));
	*slot = n + 1;
	s->keys_len += klen + 1;
	sc->open = true;
	sc->nm = 0;
	sc->first_off = hoff;
	return 0;
}

/* Take one tar member into the scan. */
static int add_member(struct scan *sc, const struct tar_member *m,
		      struct diag *d)
{
	struct tar_source *s = sc->s;
	const char *base = strrchr(m->name, '/'), *dot;
	struct scan_member *sm;
	size_t klen, elen;
	int err;

	if (!tar_is_regular(m->type))
		return 0;
	base = base ? base + 1 : m->name;
	dot = strchr(base, '.');
	if (base[0] == '.' || !dot || !dot[1])
		return 0;
	klen = (size_t)(dot - m->name);
	elen = strlen(dot + 1);
	if (elen > EXT_MAX)
		return diag_set(
			d, LOADER_EFORMAT,
			"%s: offset %" PRIu64
			": member \"%s\": extension longer than %d characters",
			s->path, m->header_off, m->name, EXT_MAX);
	if (m->size > UINT32_MAX)
		return diag_set(
			d, LOADER_ETOOBIG,
			"%s: offset %" PRIu64 ": member \"%s\" has %" PRIu64
			" bytes (at most %" PRIu32 " fit a field)",
			s->path, m->header_off, m->name, m->size, UINT32_MAX);
	if (!sc->open || strlen(key_of(s, s->base.count)) != klen ||
	    memcmp(key_of(s, s->base.count), m->name, klen)) {
		err = finish_sample(sc, d);
		if (!err)
			err = start_sample(sc, m->name, klen, m->header_off, d);
		if (err)
			return err;
	}
	if (sc->nm == SCHEMA_MAX_FIELDS)
		return diag_set(d, LOADER_ESCHEMA,
				"%s: offset %" PRIu64
				": sample \"%s\" has more than %d members",
				s->path, m->header_off,
				key_of(s, s->base.count), SCHEMA_MAX_FIELDS);
	sm = &sc->m[sc->nm];
	for (size_t i = 0; i <= elen; i++) {
		char c = dot[1 + i];

		sm->ext[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
	}
	for (unsigned j = 0; j < sc->nm; j++)
		if (!strcmp(sc->m[j].ext, sm->ext))
			return diag_set(d, LOADER_EFORMAT,
					"%s: offset %" PRIu64
					": sample \"%s\" has two .%s members",
					s->path, m->header_off,
					key_of(s, s->base.count), sm->ext);
	err = intern_spell(s, dot + 1, &sm->spell);
	if (err == LOADER_ETOOBIG)
		return diag_set(d, err,
				"%s: offset %" PRIu64
				": more than %u different extensions",
				s->path, m->header_off, UINT16_MAX + 1u);
	if (err)
		return err;
	sm->off = m->data_off;
	sm->len = (uint32_t)m->size;
	sc->nm++;
	return 0;
}

static void tar_close_source(struct source *base)
{
	struct tar_source *s = (struct tar_source *)base;

	if (!s)
		return;
	source_free_classes(base->classes, base->nclasses);
	if (s->fd >= 0)
		close(s->fd);
	free(s->path);
	free(s->ragged);
	free(s->spell);
	free(s->keys);
	free(s->key_off);
	free(s->items);
	free(s->buf);
	free(s);
}

static int tar_open_source(struct source **out, const char *path,
			   const struct source_opts *o, struct diag *d)
{
	struct scan sc = { 0 };
	struct tar_reader *t = NULL;
	struct tar_member m;
	struct tar_source *s;
	int err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = &source_tar_ops;
	s->fd = -1;
	s->path = strdup(path);
	s->ragged = o && o->ragged ? strdup(o->ragged) : NULL;
	if (!s->path || (o && o->ragged && !s->ragged)) {
		err = -ENOMEM;
		goto out;
	}
	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd < 0) {
		err = diag_set(d, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	err = tar_open(&t, s->fd, path, d);
	if (err)
		goto out;
	sc.s = s;
	while ((err = tar_next(t, &m, d)) > 0) {
		err = add_member(&sc, &m, d);
		if (err)
			goto out;
	}
	if (!err)
		err = finish_sample(&sc, d);
	if (!err && o->classes)
		err = source_parse_classes(o->classes, &s->base.classes,
					   &s->base.nclasses);
out:
	free(sc.hash);
	tar_close(t);
	if (err) {
		tar_close_source(&s->base);
		return err;
	}
	*out = &s->base;
	return 0;
}

/*
 * Decimal text, as WebDataset writes labels ("7\n"): surrounding white
 * space allowed, nothing else.
 */
static int parse_int(const unsigned char *p, size_t len, int64_t *v,
		     struct diag *d)
{
	char text[INT_TEXT_MAX + 1], *b = text, *e, *end;
	long long x;

	if (len > INT_TEXT_MAX)
		return diag_set(d, LOADER_EFORMAT,
				"%zu bytes is too long for a decimal integer",
				len);
	memcpy(text, p, len);
	text[len] = '\0';
	while (*b == ' ' || (*b >= '\t' && *b <= '\r'))
		b++;
	e = text + len;
	while (e > b && (e[-1] == ' ' || (e[-1] >= '\t' && e[-1] <= '\r')))
		e--;
	*e = '\0';
	end = b + (*b == '-' || *b == '+');
	if (!*end)
		goto bad;
	for (; *end; end++)
		if (*end < '0' || *end > '9')
			goto bad;
	errno = 0;
	x = strtoll(b, &end, 10);
	if (errno)
		goto bad;
	*v = x;
	return 0;
bad:
	/* Show the text only if it is printable; it came from the tar. */
	for (e = text; *e; e++)
		if (*e < ' ' || *e > '~')
			return diag_set(
				d, LOADER_EFORMAT,
				"not a decimal integer (%zu bytes of binary data)",
				len);
	return diag_set(d, LOADER_EFORMAT,
			"\"%s\" is not a decimal integer (or out of range)",
			text);
}

static void name_member(const struct tar_source *s, uint64_t i,
			const struct tar_item *it, char *where, size_t wn)
{
	snprintf(where, wn, "%s: member %s.%s at offset %" PRIu64, s->path,
		 key_of(s, i), s->spell[it->spell], it->off);
}

/*
 * A sample's .npy member (data, len bytes, read whole): check that its
 * header says what the first sample's did, and give the array's bytes,
 * little-endian (a big-endian array is swapped in place).
 */
static int npy_payload(const struct tar_source *s, const struct field *fl,
		       unsigned char *data, uint32_t len, struct shard_field *f,
		       struct diag *d)
{
	struct npy_info n;
	uint64_t want[SCHEMA_MAX_DIMS];
	char got[128], first[128];
	bool same;
	int err = npy_parse(data, len, &n, d);

	if (err)
		return err;
	same = !n.fortran && npy_dtype(&n) == fl->dtype && n.ndim == fl->ndim;
	for (uint32_t i = 0; i < fl->ndim; i++) {
		/* A ragged field's first dimension is each sample's own. */
		want[i] = i == 0 && field_ragged(fl) ? n.dims[0] : fl->dims[i];
		same = same && n.dims[i] == want[i];
	}
	if (!same) {
		shape_text(n.dims, n.ndim, got, sizeof(got));
		shape_text(want, fl->ndim, first, sizeof(first));
		return diag_set(
			d, LOADER_ESCHEMA,
			"array %c%c%u%s %s differs from the first sample's %s %s (every sample's .npy must have one dtype and shape; one whose first dimension varies is packed with --ragged FIELD)",
			n.order, n.kind, n.itemsize,
			n.fortran ? " in Fortran order" : "", got,
			dtype_name(fl->dtype), first);
	}
	err = npy_check_size(&n, len, d);
	if (err)
		return err;
	f->data = data + n.data_off;
	f->len = (uint32_t)(len - n.data_off);
	if (n.order == '>') {
		unsigned char *p = data + n.data_off;

		for (uint64_t e = 0; e < n.count; e++, p += n.itemsize)
			for (uint32_t a = 0, b = n.itemsize - 1; a < b;
			     a++, b--) {
				unsigned char t = p[a];

				p[a] = p[b];
				p[b] = t;
			}
	}
	return 0;
}

static int tar_get(struct source *base, uint64_t i, struct codec_ctx *ctx,
		   struct shard_field *f, char *where, size_t wn,
		   struct diag *d)
{
	struct tar_source *s = (struct tar_source *)base;
	const struct schema *sch = &base->schema;
	const struct tar_item *it;
	size_t total = 0, pos = 0;
	int err;

	if (i >= base->count) {
		snprintf(where, wn, "%s", s->path);
		return diag_set(d, LOADER_ERANGE,
				"sample %" PRIu64 " out of range (%" PRIu64
				" samples)",
				i, base->count);
	}
	it = s->items + i * sch->nfields;
	name_member(s, i, &it[0], where, wn);
	for (uint32_t k = 0; k < sch->nfields; k++)
		total += it[k].len;
	/* At least one byte, so that buf + pos is never NULL + 0. */
	if (!s->buf || total > s->buf_cap) {
		void *p = realloc(s->buf, total ? total : 1);

		if (!p)
			return -ENOMEM;
		s->buf = p;
		s->buf_cap = total ? total : 1;
	}
	for (uint32_t k = 0; k < sch->nfields; k++) {
		unsigned char *data = s->buf + pos;
		uint32_t len = it[k].len;

		name_member(s, i, &it[k], where, wn);
		err = fdio_pread_all(s->fd, data, len, it[k].off);
		if (err)
			return diag_set(
				d, err, "read: %s",
				err == LOADER_ETRUNC ?
					"the tar file shrank since it was scanned" :
					loader_strerror(err));
		s->bytes_in += len;
		pos += len;
		f[k].data = data;
		f[k].len = len;
		if (sch->f[k].kind == FIELD_JPEG &&
		    (len < 2 || data[0] != 0xff || data[1] != 0xd8))
			return diag_set(d, LOADER_EDECODE,
					"not a JPEG (no FF D8 at the start)");
		if (s->conv[k] == CONV_NPY) {
			err = npy_payload(s, &sch->f[k], data, len, &f[k], d);
			if (err)
				return err;
		}
		if (s->conv[k] == CONV_INT_TEXT) {
			int64_t v = 0;

			err = parse_int(data, len, &v, d);
			if (err)
				return err;
			for (unsigned b = 0; b < 8; b++)
				s->ints[k][b] =
					(unsigned char)((uint64_t)v >> (8 * b));
			f[k].data = s->ints[k];
			f[k].len = 8;
		}
		f[k].raw_len = f[k].len;
	}
	/* For errors met later on (compression, writing): the whole sample. */
	name_member(s, i, &it[0], where, wn);
	return 0;
}

static uint64_t tar_bytes_in(const struct source *base)
{
	return ((const struct tar_source *)base)->bytes_in;
}

const struct source_ops source_tar_ops = {
	.name = "tar",
	.detect = tar_detect,
	.open = tar_open_source,
	.get = tar_get,
	.bytes_in = tar_bytes_in,
	.close = tar_close_source,
};
