/*
 * jpeg_decode - the decode-only limit: how many JPEGs one thread turns into
 * RGB pixels per second with libjpeg-turbo's full decode.
 *
 *   bench/jpeg_decode [-t SECONDS] DIR
 *
 * Every *.jpg / *.jpeg file under DIR is read into memory first; then the
 * whole set is decoded (TurboJPEG, tjDecompress2 to packed RGB, default
 * flags: fancy upsampling, accurate integer IDCT) over and over until at
 * least SECONDS (default 2) have passed, and only the decoding is timed.
 * Prints
 *
 *   decode_only img_per_s=... mean_bytes=... images=... decoded=... seconds=...
 *
 * A file TurboJPEG cannot decode is an error: the limit is only meaningful
 * over the same files the loaders read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

struct blob {
	unsigned char *data;
	size_t len;
	char *path;
};

struct corpus {
	struct blob *v;
	size_t n, cap;
	size_t bytes;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int is_jpeg_name(const char *name)
{
	const char *dot = strrchr(name, '.');

	return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg"));
}

/* Read the whole of path into a new buffer; return 0 or -errno. */
static int read_file(const char *path, struct blob *b)
{
	struct stat st;
	size_t off = 0;
	int fd, ret = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	b->len = st.st_size;
	b->data = malloc(b->len ? b->len : 1);
	if (!b->data) {
		ret = -ENOMEM;
		goto out;
	}
	while (off < b->len) {
		ssize_t r = read(fd, b->data + off, b->len - off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			ret = r < 0 ? -errno : -EIO;
			free(b->data);
			b->data = NULL;
			goto out;
		}
		off += r;
	}
out:
	close(fd);
	return ret;
}

static int add_file(struct corpus *c, const char *path)
{
	struct blob b = { 0 };
	int ret;

	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		struct blob *v = realloc(c->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		c->v = v;
		c->cap = cap;
	}
	ret = read_file(path, &b);
	if (ret)
		return ret;
	b.path = strdup(path);
	if (!b.path) {
		free(b.data);
		return -ENOMEM;
	}
	c->v[c->n++] = b;
	c->bytes += b.len;
	return 0;
}

/* Add every JPEG under dir, recursively; return 0 or -errno. */
static int scan(struct corpus *c, const char *dir)
{
	struct dirent **names = NULL;
	int i, n, ret = 0;

	/* Sorted, so that the decode order is the same on every run. */
	n = scandir(dir, &names, NULL, alphasort);
	if (n < 0) {
		ret = -errno;
		fprintf(stderr, "jpeg_decode: %s: %s\n", dir, strerror(-ret));
		return ret;
	}
	for (i = 0; i < n; i++) {
		const char *name = names[i]->d_name;
		char *path = NULL;
		struct stat st;

		if (ret || name[0] == '.')
			goto next;
		if (asprintf(&path, "%s/%s", dir, name) < 0) {
			path = NULL;
			ret = -ENOMEM;
			goto next;
		}
		if (stat(path, &st) < 0) {
			ret = -errno;
			fprintf(stderr, "jpeg_decode: %s: %s\n", path,
				strerror(-ret));
		} else if (S_ISDIR(st.st_mode)) {
			ret = scan(c, path);
		} else if (S_ISREG(st.st_mode) && is_jpeg_name(name)) {
			ret = add_file(c, path);
			if (ret)
				fprintf(stderr, "jpeg_decode: %s: %s\n", path,
					strerror(-ret));
		}
	next:
		free(path);
		free(names[i]);
	}
	free(names);
	return ret;
}

/*
 * Decode every blob once into out (grown as needed); return 0, or -EINVAL
 * after naming the file TurboJPEG refused.
 */
static int decode_all(tjhandle tj, const struct corpus *c, unsigned char **out,
		      size_t *out_cap)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		const struct blob *b = &c->v[i];
		int w, h, sub, cs;
		size_t need;

		if (tjDecompressHeader3(tj, b->data, b->len, &w, &h, &sub,
					&cs) < 0)
			goto bad;
		need = (size_t)w * h * 3;
		if (need > *out_cap) {
			unsigned char *p = realloc(*out, need);

			if (!p)
				return -ENOMEM;
			*out = p;
			*out_cap = need;
		}
		if (tjDecompress2(tj, b->data, b->len, *out, w, 0, h, TJPF_RGB,
				  0) < 0)
			goto bad;
	}
	return 0;
bad:
	fprintf(stderr, "jpeg_decode: %s: %s\n", c->v[i].path,
		tjGetErrorStr2(tj));
	return -EINVAL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: jpeg_decode [-t SECONDS] DIR\n"
		   "Decode every JPEG under DIR (read into memory first) "
		   "on one thread\nuntil at least SECONDS (default 2) "
		   "have passed; print images per second.\n");
}

int main(int argc, char **argv)
{
	struct corpus c = { 0 };
	unsigned char *out = NULL;
	size_t out_cap = 0, decoded = 0, i;
	double min_s = 2.0, t0, dt;
	tjhandle tj = NULL;
	int opt, ret = 1;

	while ((opt = getopt(argc, argv, "ht:")) != -1) {
		switch (opt) {
		case 't':
			min_s = strtod(optarg, NULL);
			if (!(min_s > 0)) {
				usage(stderr);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	if (scan(&c, argv[optind]))
		goto out;
	if (!c.n) {
		fprintf(stderr, "jpeg_decode: no JPEG files under %s\n",
			argv[optind]);
		goto out;
	}
	tj = tjInitDecompress();
	if (!tj) {
		fprintf(stderr, "jpeg_decode: %s\n", tjGetErrorStr2(NULL));
		goto out;
	}

	/* One untimed pass: page in the output buffer and the code. */
	if (decode_all(tj, &c, &out, &out_cap))
		goto out;
	t0 = now();
	do {
		if (decode_all(tj, &c, &out, &out_cap))
			goto out;
		decoded += c.n;
		dt = now() - t0;
	} while (dt < min_s);

	printf("decode_only img_per_s=%.1f mean_bytes=%.0f images=%zu "
	       "decoded=%zu seconds=%.2f\n",
	       decoded / dt, (double)c.bytes / c.n, c.n, decoded, dt);
	ret = 0;
out:
	if (tj)
		tjDestroy(tj);
	free(out);
	for (i = 0; i < c.n; i++) {
		free(c.v[i].data);
		free(c.v[i].path);
	}
	free(c.v);
	return ret;
}
