/*
 * src_folder.c - an ImageFolder tree (SRC/CLASS/.../NAME.jpg) as a pack source.
 *
 * The semantics are torchvision's ImageFolder: the classes are the
 * immediate subdirectories of SRC sorted by name (byte order), a sample's
 * label is its class's index, and each class directory is searched
 * recursively (following symbolic links) for files whose extension is
 * .jpg, .jpeg or .png in any case; each holds a JPEG or a PNG, told by
 * its content, not its name (ImageNet has PNGs named .JPEG). The other
 * images torchvision reads (.bmp, .tif, .webp, ...) are not packed, and
 * counted, as are other files and hidden ones (struct source_left). Samples come class by class; within a class
 * they are ordered as torchvision's sorted(os.walk()) orders them: by
 * directory path, then by file name. Unlike torchvision, names starting
 * with '.' (hidden files and directories) are skipped at every level, so
 * that editor and file-manager droppings never become classes or samples
 * (torchvision counts a ".ipynb_checkpoints" directory as a class: the
 * summary names such directories, since labels then differ). A class
 * directory without an image stays a class (its label is kept) and is
 * named in the summary; torchvision 0.14 refuses such a tree.
 *
 * Opening lists the tree once and keeps the relative paths in one string
 * arena; get() reads one file per call into a buffer that grows to the
 * largest file. JPEGs are stored as they are, unless --max-side asks for
 * smaller ones: then a larger image is decoded at the smallest DCT scale
 * that keeps enough pixels, resampled so that its longer side is exactly
 * max_side and encoded again. The decode is the streams' (jpeg.h over
 * jroi.h), so a re-encoded image holds the pixels a stream would have
 * seen: gray stays gray, CMYK and YCCK become RGB.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grow.h"
#include "codec.h"
#include "fdio.h"
#include "jpeg.h"
#include "loader_error.h"
#include "resize.h"
#include "source.h"

/* Deeper than any real tree; reaching it means a symbolic-link loop. */
#define FOLDER_MAX_DEPTH       64
#define FOLDER_DEFAULT_QUALITY 90

struct folder_source {
	struct source base;
	char *root; /* SRC as given */

	/* The file list: relative paths, NUL-terminated, back to back. */
	char *arena;
	size_t arena_len, arena_cap;
	uint64_t *off; /* sample i's path is arena + off[i] */
	uint32_t *label;
	uint32_t *dirlen; /* open() only: length of the directory part */
	uint64_t cap;

	uint32_t max_side;   /* 0: store every JPEG as-is */
	uint64_t max_pixels; /* likewise, by pixels */
	int quality;

	/* get() state, reused from call to call. */
	char path[PATH_MAX];
	unsigned char *file; /* the file's bytes */
	size_t file_cap;
	unsigned char *pix; /* decoded at a reduced scale */
	size_t pix_cap;
	unsigned char *small; /* resampled to the final size */
	size_t small_cap;
	unsigned char *scratch; /* for rsz_run() */
	size_t scratch_cap;
	struct rsz_plan *plan; /* the last plan, for images of one size */
	uint32_t plan_dims[4];
	unsigned char *jpeg;  /* re-encoded payload, freed on the next get */
	unsigned char lab[8]; /* the label, little-endian int64 */
	uint64_t bytes_in;

	/*
	 * The directories walked, by (device, inode): one reached again
	 * through a symbolic link (a loop, or two links to one directory)
	 * is not walked twice. Open addressing, a power of two of slots.
	 */
	struct dir_id {
		dev_t dev;
		ino_t ino;
		bool used;
	} * seen;
	size_t nseen, seen_cap;
};

/* A file during open(), for sorting. */
struct folder_entry {
	const char *path;
	uint32_t dirlen;
	uint32_t label;
};

static bool is_hidden(const char *name)
{
	return name[0] == '.';
}

/* What a file's name says it holds. */
enum name_kind {
	NAME_OTHER,	  /* not an image */
	NAME_IMAGE,	  /* .jpg, .jpeg, .png: packed */
	NAME_UNSUPPORTED, /* an image torchvision reads and pack does not */
};

/*
 * By extension, in any case, as torchvision's IMG_EXTENSIONS: .jpg,
 * .jpeg and .png are packed (each told JPEG or PNG by its content
 * later: ImageNet has PNGs named .JPEG); .ppm, .bmp, .pgm, .tif, .tiff
 * and .webp are images pack cannot store.
 */
static enum name_kind name_kind(const char *name)
{
	static const char *const packed[] = { ".jpg", ".jpeg", ".png" };
	static const char *const other[] = { ".ppm", ".bmp",  ".pgm",
					     ".tif", ".tiff", ".webp" };
	const char *dot = strrchr(name, '.');

	if (!dot || dot == name)
		return NAME_OTHER;
	for (size_t i = 0; i < sizeof(packed) / sizeof(packed[0]); i++)
		if (!strcasecmp(dot, packed[i]))
			return NAME_IMAGE;
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (!strcasecmp(dot, other[i]))
			return NAME_UNSUPPORTED;
	return NAME_OTHER;
}

/* Append ", name" to the list in buf (n bytes); "..." once it is full. */
static void list_add(char *buf, size_t n, const char *name)
{
	size_t len = strlen(buf);

	if (len >= 3 && !strcmp(buf + len - 3, "..."))
		return;
	if (len + 2 + strlen(name) + 4 >= n) {
		snprintf(buf + len, n - len, "%s...", len ? ", " : "");
		return;
	}
	snprintf(buf + len, n - len, "%s%s", len ? ", " : "", name);
}

/*
 * Whether dir/name is a directory. d_type saves a stat() per entry on
 * file systems that fill it in; symbolic links are followed, as
 * torchvision follows them.
 */
static bool entry_is_dir(const char *dir, const struct dirent *e)
{
	char path[PATH_MAX];
	struct stat st;

	if (e->d_type == DT_DIR)
		return true;
	if (e->d_type != DT_UNKNOWN && e->d_type != DT_LNK)
		return false;
	if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >=
	    (int)sizeof(path))
		return false;
	return !stat(path, &st) && S_ISDIR(st.st_mode);
}

/*
 * An image inside dir, or in its subdirectories down to depth levels:
 * enough to tell an ImageFolder class, whose images may sit in
 * subdirectories of their own.
 */
static bool has_image(const char *dir, unsigned depth)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char sub[PATH_MAX];
	bool found = false;

	if (!d)
		return false;
	while (!found && (e = readdir(d))) {
		if (is_hidden(e->d_name))
			continue;
		if (!entry_is_dir(dir, e))
			found = name_kind(e->d_name) == NAME_IMAGE;
		else if (depth && snprintf(sub, sizeof(sub), "%s/%s", dir,
					   e->d_name) < (int)sizeof(sub))
			found = has_image(sub, depth - 1);
	}
	closedir(d);
	return found;
}

static bool folder_detect(const char *path)
{
	DIR *dir = opendir(path);
	struct dirent *e;
	char sub[PATH_MAX];
	bool found = false;

	if (!dir)
		return false;
	while (!found && (e = readdir(dir))) {
		if (is_hidden(e->d_name) || !entry_is_dir(path, e))
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name) <
		    (int)sizeof(sub))
			found = has_image(sub, 3);
	}
	closedir(dir);
	return found;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Class order, then torchvision's: directory path (a prefix sorts
 * first), then file name. Comparing whole paths instead would put
 * "a/b.jpg" between "a.jpg" and "a/c/" and differ from it.
 */
static int cmp_entry(const void *pa, const void *pb)
{
	const struct folder_entry *a = pa, *b = pb;
	uint32_t n = a->dirlen < b->dirlen ? a->dirlen : b->dirlen;
	int r;

	if (a->label != b->label)
		return a->label < b->label ? -1 : 1;
	r = memcmp(a->path, b->path, n);
	if (r)
		return r;
	if (a->dirlen != b->dirlen)
		return a->dirlen < b->dirlen ? -1 : 1;
	return strcmp(a->path + a->dirlen, b->path + b->dirlen);
}

/* The immediate subdirectories of root, sorted: the class names. */
static int list_classes(struct folder_source *s, struct diag *d)
{
	DIR *dir = opendir(s->root);
	struct dirent *e;
	char **v = NULL, **nv;
	uint32_t n = 0, cap = 0;
	int err = 0;

	if (!dir)
		return diag_set(d, -errno, "%s: %s", s->root, strerror(errno));
	for (;;) {
		errno = 0;
		e = readdir(dir);
		if (!e) {
			if (errno)
				err = diag_set(d, -errno, "%s: %s", s->root,
					       strerror(errno));
			break;
		}
		if (!entry_is_dir(s->root, e))
			continue;
		if (is_hidden(e->d_name)) {
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				list_add(s->base.left.hidden_classes,
					 sizeof(s->base.left.hidden_classes),
					 e->d_name);
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				err = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n] = strdup(e->d_name);
		if (!v[n]) {
			err = -ENOMEM;
			break;
		}
		n++;
	}
	closedir(dir);
	if (err) {
		source_free_classes(v, n);
		return err;
	}
	/* qsort() wants a non-NULL array even for no elements. */
	if (n)
		qsort(v, n, sizeof(*v), cmp_str);
	s->base.classes = v;
	s->base.nclasses = n;
	return 0;
}

static int add_file(struct folder_source *s, const char *rel, size_t dirlen,
		    uint32_t label)
{
	size_t len = strlen(rel) + 1;
	uint64_t i = s->base.count;

	if (s->arena_len + len > s->arena_cap) {
		size_t cap = s->arena_cap ? s->arena_cap : 1 << 16;
		char *p;

		while (cap < s->arena_len + len)
			cap *= 2;
		p = realloc(s->arena, cap);
		if (!p)
			return -ENOMEM;
		s->arena = p;
		s->arena_cap = cap;
	}
	if (i == s->cap) {
		uint64_t cap = s->cap ? s->cap * 2 : 1024;
		uint64_t *off = realloc(s->off, cap * sizeof(*off));
		uint32_t *lab, *dl;

		if (!off)
			return -ENOMEM;
		s->off = off;
		lab = realloc(s->label, cap * sizeof(*lab));
		if (!lab)
			return -ENOMEM;
		s->label = lab;
		dl = realloc(s->dirlen, cap * sizeof(*dl));
		if (!dl)
			return -ENOMEM;
		s->dirlen = dl;
		s->cap = cap;
	}
	memcpy(s->arena + s->arena_len, rel, len);
	s->off[i] = s->arena_len;
	s->label[i] = label;
	s->dirlen[i] = (uint32_t)dirlen;
	s->arena_len += len;
	s->base.count = i + 1;
	return 0;
}

/*
 * Collect the JPEGs under root/rel (rel is relative to root, and rel's
 * buffer of PATH_MAX bytes is extended in place for subdirectories).
 */
static size_t dir_slot(const struct folder_source *s, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)dev * 0x9e3779b97f4a7c15ull) ^
		     ((uint64_t)ino * 0xbf58476d1ce4e5b9ull);

	return (size_t)(h ^ (h >> 29)) & (s->seen_cap - 1);
}

/*
 * Note directory st as walked: 1 if it was new, 0 if it had been walked
 * already, -ENOMEM.
 */
static int dir_first_visit(struct folder_source *s, const struct stat *st)
{
	size_t i;

	if (2 * (s->nseen + 1) > s->seen_cap) {
		size_t cap = s->seen_cap ? s->seen_cap * 2 : 256;
		struct dir_id *v = calloc(cap, sizeof(*v)), *old = s->seen;
		size_t oldcap = s->seen_cap;

		if (!v)
			return -ENOMEM;
		s->seen = v;
		s->seen_cap = cap;
		for (size_t k = 0; k < oldcap; k++) {
			if (!old[k].used)
				continue;
			for (i = dir_slot(s, old[k].dev, old[k].ino); v[i].used;
			     i = (i + 1) & (cap - 1))
				;
			v[i] = old[k];
		}
		free(old);
	}
	for (i = dir_slot(s, st->st_dev, st->st_ino); s->seen[i].used;
	     i = (i + 1) & (s->seen_cap - 1))
		if (s->seen[i].dev == st->st_dev &&
		    s->seen[i].ino == st->st_ino)
			return 0;
	s->seen[i] = (struct dir_id){ st->st_dev, st->st_ino, true };
	s->nseen++;
	return 1;
}

static int walk(struct folder_source *s, char *rel, uint32_t label,
		unsigned depth, struct diag *d)
{
	struct stat st;
	char dir[PATH_MAX];
	size_t rlen = strlen(rel);
	struct dirent *e;
	DIR *dh;
	int err = 0;

	if (depth > FOLDER_MAX_DEPTH)
		return diag_set(
			d, -ELOOP,
			"%s/%s: nested more than %d directories deep (a symbolic-link loop?)",
			s->root, rel, FOLDER_MAX_DEPTH);
	if (snprintf(dir, sizeof(dir), "%s/%s", s->root, rel) >=
	    (int)sizeof(dir))
		return diag_set(d, -ENAMETOOLONG, "%s/%s: path too long",
				s->root, rel);
	if (stat(dir, &st))
		return diag_set(d, -errno, "%s: %s", dir, strerror(errno));
	err = dir_first_visit(s, &st);
	if (err < 0)
		return err;
	if (!err) {
		/* Followed links lead here twice: its samples once. */
		fprintf(stderr,
			"loaderctl pack: warning: %s: a directory already packed (reached again through a symbolic link): skipped\n",
			dir);
		return 0;
	}
	err = 0;
	dh = opendir(dir);
	if (!dh)
		return diag_set(d, -errno, "%s: %s", dir, strerror(errno));
	for (;;) {
		size_t nlen;
		bool sub;

		errno = 0;
		e = readdir(dh);
		if (!e) {
			if (errno)
				err = diag_set(d, -errno, "%s: %s", dir,
					       strerror(errno));
			break;
		}
		if (is_hidden(e->d_name)) {
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
				s->base.left.hidden++;
			continue;
		}
		sub = entry_is_dir(dir, e);
		if (!sub && name_kind(e->d_name) == NAME_UNSUPPORTED) {
			s->base.left.unsupported++;
			list_add(s->base.left.unsupported_ext,
				 sizeof(s->base.left.unsupported_ext),
				 strrchr(e->d_name, '.'));
			continue;
		}
		if (!sub && name_kind(e->d_name) != NAME_IMAGE) {
			s->base.left.not_image++;
			continue;
		}
		nlen = strlen(e->d_name);
		if (rlen + 1 + nlen >= PATH_MAX) {
			err = diag_set(d, -ENAMETOOLONG, "%s/%s: path too long",
				       dir, e->d_name);
			break;
		}
		rel[rlen] = '/';
		memcpy(rel + rlen + 1, e->d_name, nlen + 1);
		/*
		 * Anything that is not a directory and is named like a
		 * JPEG is a sample, as torchvision has it; a dangling link
		 * or a FIFO then fails in get(), by name.
		 */
		if (sub)
			err = walk(s, rel, label, depth + 1, d);
		else
			err = add_file(s, rel, rlen, label);
		rel[rlen] = '\0';
		if (err)
			break;
	}
	closedir(dh);
	return err;
}

/* Sort the samples, then drop what only sorting needed. */
static int sort_files(struct folder_source *s)
{
	uint64_t n = s->base.count;
	struct folder_entry *v = malloc((n ? n : 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++)
		v[i] = (struct folder_entry){ s->arena + s->off[i],
					      s->dirlen[i], s->label[i] };
	qsort(v, n, sizeof(*v), cmp_entry);
	for (uint64_t i = 0; i < n; i++) {
		s->off[i] = (uint64_t)(v[i].path - s->arena);
		s->label[i] = v[i].label;
	}
	free(v);
	free(s->dirlen);
	s->dirlen = NULL;
	return 0;
}

static void folder_close(struct source *base)
{
	struct folder_source *s = (struct folder_source *)base;

	if (!s)
		return;
	source_free_classes(base->classes, base->nclasses);
	free(s->root);
	free(s->arena);
	free(s->off);
	free(s->label);
	free(s->dirlen);
	free(s->file);
	free(s->pix);
	free(s->small);
	free(s->scratch);
	rsz_plan_free(s->plan);
	jpg_free(s->jpeg);
	free(s->seen);
	free(s);
}

/* --classes renames the classes; their number must not change. */
static int rename_classes(struct folder_source *s, const char *list,
			  struct diag *d)
{
	char **names;
	uint32_t n;
	int err = source_parse_classes(list, &names, &n);

	if (err)
		return err;
	if (n != s->base.nclasses) {
		err = diag_set(d, LOADER_EUSAGE,
			       "--classes names %" PRIu32
			       " classes, but %s has %" PRIu32
			       " class directories (first: %s)",
			       n, s->root, s->base.nclasses,
			       s->base.classes[0]);
		source_free_classes(names, n);
		return err;
	}
	source_free_classes(s->base.classes, s->base.nclasses);
	s->base.classes = names;
	return 0;
}

static int folder_open(struct source **out, const char *path,
		       const struct source_opts *o, struct diag *d)
{
	struct folder_source *s;
	struct field *f;
	char rel[PATH_MAX];
	int err;

	if (o->max_side > RSZ_MAX_SIDE)
		return diag_set(d, LOADER_EUSAGE,
				"--max-side %" PRIu64 " is above %u",
				o->max_side, RSZ_MAX_SIDE);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base.ops = &source_folder_ops;
	s->max_side = (uint32_t)o->max_side;
	s->max_pixels = o->max_pixels;
	s->quality = o->quality ? (int)o->quality : FOLDER_DEFAULT_QUALITY;
	s->root = strdup(path);
	if (!s->root) {
		err = -ENOMEM;
		goto fail;
	}
	err = list_classes(s, d);
	if (err)
		goto fail;
	if (!s->base.nclasses) {
		err = diag_set(
			d, -ENOENT,
			"%s: no class directories (an ImageFolder is SRC/CLASS/*.jpg)%s%s",
			path,
			s->base.left.hidden_classes[0] ?
				"; hidden ones are skipped: " :
				"",
			s->base.left.hidden_classes);
		goto fail;
	}
	for (uint32_t c = 0; c < s->base.nclasses; c++) {
		if (strlen(s->base.classes[c]) >= sizeof(rel)) {
			err = diag_set(d, -ENAMETOOLONG, "%s/%s: path too long",
				       path, s->base.classes[c]);
			goto fail;
		}
		uint64_t before = s->base.count;

		strcpy(rel, s->base.classes[c]);
		err = walk(s, rel, c, 0, d);
		if (err)
			goto fail;
		if (s->base.count == before)
			list_add(s->base.left.empty_classes,
				 sizeof(s->base.left.empty_classes),
				 s->base.classes[c]);
	}
	if (!s->base.count) {
		err = diag_set(
			d, -ENOENT,
			"%s: no .jpg, .jpeg or .png files in its %" PRIu32
			" class directories",
			path, s->base.nclasses);
		goto fail;
	}
	err = sort_files(s);
	if (err)
		goto fail;
	if (o->classes) {
		err = rename_classes(s, o->classes, d);
		if (err)
			goto fail;
	}
	s->base.schema.nfields = 2;
	f = &s->base.schema.f[0];
	snprintf(f->name, sizeof(f->name), "image");
	f->kind = FIELD_JPEG;
	f = &s->base.schema.f[1];
	snprintf(f->name, sizeof(f->name), "label");
	f->kind = FIELD_TENSOR;
	f->dtype = DT_I64;
	/* Each sample's path under SRC, to name it in every report. */
	s->base.schema.nfields = 3;
	f = &s->base.schema.f[2];
	snprintf(f->name, sizeof(f->name), SCHEMA_KEY);
	f->kind = FIELD_BYTES;
	*out = &s->base;
	return 0;
fail:
	folder_close(&s->base);
	return err;
}

/* Read s->path whole into s->file; *len gets its size. */
static int read_file(struct folder_source *s, size_t *len, struct diag *d)
{
	uint64_t size = 0;
	int fd, err = 0;

	/*
	 * Not blocking: a FIFO named like a JPEG would wait for a writer for
	 * ever; opened, it is refused as not a regular file.
	 */
	fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return diag_set(d, -errno, "open: %s", strerror(errno));
	/* A record field holds at most 4 GiB - 1 bytes. */
	err = fdio_regular_size(fd, UINT32_MAX, &size);
	if (err == -EINVAL) {
		err = diag_set(d, err, "not a regular file");
		goto out;
	}
	if (err == LOADER_ETOOBIG) {
		err = diag_set(d, err,
			       "%" PRIu64
			       " bytes, above a field's limit of %" PRIu32,
			       size, UINT32_MAX);
		goto out;
	}
	if (err) {
		err = diag_set(d, err, "stat: %s", strerror(-err));
		goto out;
	}
	/* Not fdio_read_whole(): one buffer serves every file in turn. */
	err = grow_buf(&s->file, &s->file_cap, size ? (size_t)size : 1);
	if (err)
		goto out;
	err = fdio_pread_all(fd, s->file, (size_t)size, 0);
	if (err == LOADER_ETRUNC)
		err = diag_set(d, err,
			       "offset %" PRIu64
			       ": file shrank while being read",
			       size);
	else if (err)
		err = diag_set(d, err, "read: %s", strerror(-err));
	if (!err) {
		*len = (size_t)size;
		s->bytes_in += size;
	}
out:
	close(fd);
	return err;
}

/*
 * The size that fits max_side: the longer side becomes max_side and the
 * shorter keeps the aspect ratio, rounded to nearest and at least 1.
 */
static void fit(uint32_t w, uint32_t h, uint32_t max_side, uint32_t *ow,
		uint32_t *oh)
{
	uint32_t lo = w < h ? w : h, hi = w < h ? h : w;
	uint32_t s = (uint32_t)(((uint64_t)lo * max_side * 2 + hi) /
				((uint64_t)hi * 2));

	s = s ? s : 1;
	*ow = w >= h ? max_side : s;
	*oh = w >= h ? s : max_side;
}

/*
 * The resampling plan for dims (in w, h, out w, h): the last one when the
 * sizes repeat, as they do in datasets of photos from one camera.
 */
static int plan_for(struct folder_source *s, const uint32_t dims[4],
		    struct diag *d)
{
	int err;

	if (s->plan && !memcmp(dims, s->plan_dims, sizeof(s->plan_dims)))
		return 0;
	rsz_plan_free(s->plan);
	s->plan = NULL;
	err = rsz_plan_new(dims[0], dims[1], dims[2], dims[3], &s->plan);
	if (err)
		return diag_set(d, err,
				"resize %" PRIu32 "x%" PRIu32 " to %" PRIu32
				"x%" PRIu32 ": %s",
				dims[0], dims[1], dims[2], dims[3],
				strerror(-err));
	memcpy(s->plan_dims, dims, sizeof(s->plan_dims));
	return 0;
}

/*
 * The size an image of w x h is stored at: the longer side at most
 * max_side, the pixels at most max_pixels, the aspect ratio kept; w x h
 * itself when it fits both.
 */
static void target(const struct folder_source *s, uint32_t w, uint32_t h,
		   uint32_t *ow, uint32_t *oh)
{
	*ow = w;
	*oh = h;
	if (s->max_side && (w > s->max_side || h > s->max_side))
		fit(w, h, s->max_side, ow, oh);
	if (s->max_pixels && (uint64_t)*ow * *oh > s->max_pixels) {
		double k = sqrt((double)s->max_pixels / ((double)*ow * *oh));
		uint32_t nw = (uint32_t)(*ow * k), nh = (uint32_t)(*oh * k);

		/* Rounding may leave it a row or column too many. */
		while ((uint64_t)nw * nh > s->max_pixels)
			nw > nh ? nw-- : nh--;
		*ow = nw ? nw : 1;
		*oh = nh ? nh : 1;
	}
}

/*
 * Shrink the image in s->file (w x h, len bytes) to ow x oh and encode
 * it again, as a JPEG, into s->jpeg.
 */
static int shrink(struct folder_source *s, struct codec_ctx *ctx, size_t len,
		  uint32_t ow, uint32_t oh, size_t *out_len, struct diag *d)
{
	struct jpg_geom g;
	const unsigned char *px;
	int err;

	/* Decode no larger than needed: DCT scaling is nearly free. */
	err = jpg_scale_for(ctx, s->file, len, ow > oh ? ow : oh, &g, d);
	if (!err)
		err = grow_buf(&s->pix, &s->pix_cap,
			       (size_t)g.width * g.height * g.channels);
	if (!err)
		err = jpg_decode_scaled(ctx, s->file, len, &g, s->pix, d);
	if (err)
		return err;
	px = s->pix;
	if (g.width != ow || g.height != oh) {
		uint32_t dims[4] = { g.width, g.height, ow, oh };

		err = plan_for(s, dims, d);
		if (!err)
			err = grow_buf(&s->scratch, &s->scratch_cap,
				       rsz_scratch_size(s->plan, g.channels));
		if (!err)
			err = grow_buf(&s->small, &s->small_cap,
				       (size_t)ow * oh * g.channels);
		if (!err)
			err = rsz_run(s->plan, s->pix,
				      (size_t)g.width * g.channels, s->small,
				      (size_t)ow * g.channels, g.channels,
				      s->scratch);
		if (err)
			return err;
		px = s->small;
	}
	return jpg_encode(ctx, px, ow, oh, g.channels, s->quality, &s->jpeg,
			  out_len, d);
}

static int folder_get(struct source *base, uint64_t i, struct codec_ctx *ctx,
		      struct shard_field *f, char *where, size_t wn,
		      struct diag *d)
{
	struct folder_source *s = (struct folder_source *)base;
	struct codec_src src = { 0 };
	struct codec_info info;
	const char *rel;
	size_t len = 0;
	uint32_t ow, oh;
	uint64_t v;
	int err;

	if (!ctx)
		return diag_set(d, -EINVAL,
				"ImageFolder needs a codec context");
	if (i >= base->count)
		return diag_set(d, LOADER_ERANGE,
				"ImageFolder sample %" PRIu64 " of %" PRIu64, i,
				base->count);
	rel = s->arena + s->off[i];
	snprintf(where, wn, "%s/%s", s->root, rel);
	jpg_free(s->jpeg);
	s->jpeg = NULL;
	if (snprintf(s->path, sizeof(s->path), "%s/%s", s->root, rel) >=
	    (int)sizeof(s->path))
		return diag_set(d, -ENAMETOOLONG, "path too long");
	err = read_file(s, &len, d);
	if (err)
		return err;
	/* The header only: enough to refuse what is not a JPEG at all. */
	src.data = s->file;
	src.len = len;
	err = codec_get(CODEC_JPEG)->probe(ctx, &src, &info, d);
	if (err == LOADER_ETOOBIG && !s->max_side && !s->max_pixels) {
		size_t n = strlen(d->msg);

		snprintf(d->msg + n, sizeof(d->msg) - n,
			 " (--max-pixels or --max-side scale it down)");
		return err;
	}
	if (err)
		return err;
	f[0].data = s->file;
	f[0].len = (uint32_t)len;
	target(s, info.width, info.height, &ow, &oh);
	if (ow != info.width || oh != info.height) {
		/*
		 * Decoded as a stream decodes it: gray stays gray, every
		 * other colour space (CMYK and YCCK too) becomes the RGB a
		 * stream would deliver, and is encoded as such.
		 */
		err = shrink(s, ctx, len, ow, oh, &len, d);
		if (err)
			return err;
		if (len > UINT32_MAX)
			return diag_set(d, LOADER_ETOOBIG,
					"re-encoded JPEG of %zu bytes", len);
		f[0].data = s->jpeg;
		f[0].len = (uint32_t)len;
	}
	f[0].raw_len = f[0].len;
	v = s->label[i];
	for (unsigned k = 0; k < 8; k++)
		s->lab[k] = (unsigned char)(v >> (8 * k));
	f[1].data = s->lab;
	f[1].len = sizeof(s->lab);
	f[1].raw_len = f[1].len;
	f[2].data = rel;
	f[2].len = (uint32_t)strlen(rel);
	f[2].raw_len = f[2].len;
	return 0;
}

static uint64_t folder_bytes_in(const struct source *base)
{
	return ((const struct folder_source *)base)->bytes_in;
}

const struct source_ops source_folder_ops = {
	.name = "imagefolder",
	.detect = folder_detect,
	.open = folder_open,
	.get = folder_get,
	.bytes_in = folder_bytes_in,
	.close = folder_close,
};
