/*
 * ctl_mix.c - loaderctl mix: write and read mixture files, the JSON that
 * names a mixture's member datasets and how many samples each gives an
 * epoch (pipeline/stream/mixture.h; loaderctl(1), "MIXTURE FILES").
 *
 * create checks what it can cheaply: each local member opens as a
 * dataset (a manifest is read and checked, a tar's first block, an LMDB
 * file's meta page), and when every member's size is known from a
 * manifest, the mixture is made as a stream makes it, so that a file it
 * writes is one a stream takes. It never reads data, so s3:// members
 * are not checked. inspect reads the file with libloader's own reader
 * (client/mixfile.c, compiled into loaderctl too: one reader of the
 * format), reads every local member's sizes (tars and LMDB by a scan, as
 * loaderctl inspect does) and runs mixture_new(): the counts it prints
 * are the stream's.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "awscfg.h"
#include "ctl.h"
#include "dataset.h"
#include "ispec.h"
#include "lmdbds.h"
#include "loader_error.h"
#include "mixfile.h"
#include "mixture.h"
#include "opts.h"
#include "proto.h"
#include "recindex.h"
#include "tie.h"
#include "wds.h"

/*
 * A mixture file's members (struct loader_member, mixfile.h) become the
 * mixture's by a cast: the kinds and the most members are the same
 * numbers on both sides.
 */
TIE(LOADER_MIX_PROPORTION, MIXTURE_PROPORTION);
TIE(LOADER_MIX_REPEAT, MIXTURE_REPEAT);
TIE(LOADER_MIX_CHOOSE, MIXTURE_CHOOSE);
TIE(LOADER_MAX_MEMBERS, MIXTURE_MAX_MEMBERS);

static const char *const how_name[] = { "proportion", "repeat", "choose" };

/* A member: as given on the command line or in a file, and as read. */
struct mix_member {
	char *path;  /* as the file has it */
	char *where; /* where it is read here: a path or an s3:// URL */
	enum mixture_how how;
	double value;
	char *pipeline; /* NULL: the stream's own */
	/* Its dataset, as member_open() found it. */
	const char *format; /* "dataset", "tar", "tars", "lmdb" or "s3" */
	bool read;	    /* nshards and records[] hold its sizes */
	uint32_t nshards;
	uint64_t *records;
	uint64_t samples;
};

struct mix_set {
	uint32_t n;
	struct mix_member m[MIXTURE_MAX_MEMBERS];
	uint64_t epoch_size;
};

static void set_free(struct mix_set *s)
{
	for (uint32_t i = 0; i < s->n; i++) {
		free(s->m[i].path);
		free(s->m[i].where);
		free(s->m[i].pipeline);
		free(s->m[i].records);
	}
	s->n = 0;
}

static bool has_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/*
 * The tars files[0..n) as a member's shards, one a file (as the daemon
 * opens them, pipeline/format/dsopen.h): each must be a tar, and with
 * count its samples are counted by a scan.
 */
static int open_tars(struct mix_member *m, char *const *files, size_t n,
		     bool count, struct diag *d)
{
	m->records = calloc(n ? n : 1, sizeof(uint64_t));
	if (!m->records)
		return diag_set(d, -ENOMEM, "out of memory");
	m->nshards = (uint32_t)n;
	for (size_t i = 0; i < n; i++) {
		struct recindex *ix = NULL;
		int fd = open(files[i], O_RDONLY | O_CLOEXEC), err = 0;

		if (fd < 0)
			return diag_set(d, -errno, "%s: %s", files[i],
					strerror(errno));
		if (!wds_is_tar(fd, files[i]))
			err = diag_set(
				d, LOADER_EFORMAT,
				"%s: not a dataset (a directory with %s or of .tar files, a .tar file, or an LMDB database)",
				files[i], DSFILES_MANIFEST);
		else if (count)
			err = wds_index_scan(&ix, fd, files[i], d);
		close(fd);
		if (err)
			return err;
		if (ix) {
			m->records[i] = ix->count;
			m->samples += ix->count;
			recindex_free(ix);
		}
	}
	m->read = count;
	return 0;
}

/* A WebDataset glob: the tars it matches, in glob's (sorted) order. */
static int open_glob(struct mix_member *m, bool count, struct diag *d)
{
	glob_t g;
	int err;

	err = glob(m->where, 0, NULL, &g);
	if (err == GLOB_NOMATCH)
		return diag_set(d, LOADER_EUSAGE, "%s: no file matches",
				m->where);
	if (err)
		return diag_set(d, -EIO, "%s: glob failed", m->where);
	m->format = "tars";
	err = g.gl_pathc > UINT32_MAX ?
		      diag_set(d, LOADER_EUSAGE, "%s: too many files",
			       m->where) :
		      open_tars(m, g.gl_pathv, g.gl_pathc, count, d);
	globfree(&g);
	return err;
}

/* A directory of tars, each name dsfiles_tar_name() takes. */
static int open_tar_dir(struct mix_member *m, bool count, struct diag *d)
{
	char **names = NULL, **files;
	size_t n = 0;
	int err = wds_list(m->where, &names, &n, d);

	if (err == LOADER_EFORMAT)
		return diag_set(
			d, err,
			"%s: not a dataset (no %s, no .tar files, no LMDB database)",
			m->where, DSFILES_MANIFEST);
	if (err)
		return err;
	files = calloc(n, sizeof(*files));
	err = files ? 0 : diag_set(d, -ENOMEM, "out of memory");
	for (size_t i = 0; !err && i < n; i++)
		if (asprintf(&files[i], "%s/%s", m->where, names[i]) < 0)
			err = diag_set(d, -ENOMEM, "out of memory");
	m->format = "tars";
	if (!err)
		err = open_tars(m, files, n, count, d);
	for (size_t i = 0; i < n; i++) {
		free(names[i]);
		if (files)
			free(files[i]);
	}
	free(names);
	free(files);
	return err;
}

static int open_lmdb(struct mix_member *m, bool count, struct diag *d)
{
	struct recindex *ix;
	int fd, err;

	m->format = "lmdb";
	m->records = calloc(1, sizeof(uint64_t));
	if (!m->records)
		return diag_set(d, -ENOMEM, "out of memory");
	m->nshards = 1;
	if (!count)
		return 0;
	err = lmdbds_index_path(m->where, &fd, &ix, d);
	if (err)
		return err;
	close(fd);
	m->records[0] = m->samples = ix->count;
	m->read = true;
	recindex_free(ix);
	return 0;
}

static int open_manifest(struct mix_member *m, struct diag *d)
{
	struct dataset *ds;
	int err = dataset_load(&ds, m->where, d);

	if (err)
		return err;
	m->format = "dataset";
	m->records = calloc(ds->nshards ? ds->nshards : 1, sizeof(uint64_t));
	if (!m->records) {
		dataset_free(ds);
		return diag_set(d, -ENOMEM, "out of memory");
	}
	m->nshards = ds->nshards;
	for (uint32_t i = 0; i < ds->nshards; i++)
		m->records[i] = ds->shards[i].records;
	m->samples = ds->records;
	m->read = true;
	dataset_free(ds);
	return 0;
}

/*
 * Open m->where as a stream's client would take it: a dataset directory
 * (its manifest read and checked; its sizes then known), a directory of
 * .tar files, a .tar file, a glob of them, or an LMDB database; an
 * s3:// URL is not opened. With count, tars and LMDB are scanned for
 * their sizes too.
 */
static int member_open(struct mix_member *m, bool count, struct diag *d)
{
	struct stat st;

	if (aws_is_url(m->where)) {
		m->format = "s3";
		return 0;
	}
	if (stat(m->where, &st)) {
		if (errno == ENOENT && has_glob(m->where))
			return open_glob(m, count, d);
		return diag_set(d, -errno, "%s: %s", m->where, strerror(errno));
	}
	if (S_ISDIR(st.st_mode)) {
		char *mf;
		bool manifest;

		if (asprintf(&mf, "%s/%s", m->where, DSFILES_MANIFEST) < 0)
			return diag_set(d, -ENOMEM, "out of memory");
		manifest = access(mf, F_OK) == 0 || errno != ENOENT;
		free(mf);
		if (manifest)
			return open_manifest(m, d);
		if (lmdbds_detect(m->where))
			return open_lmdb(m, count, d);
		return open_tar_dir(m, count, d);
	}
	if (lmdbds_detect(m->where))
		return open_lmdb(m, count, d);
	m->format = "tar";
	return open_tars(m, &m->where, 1, count, d);
}

/*
 * The mixture of s's members, as a stream makes it (the seed changes no
 * count: mixture.h). Every member must have been read.
 */
static int make_mixture(const struct mix_set *s, struct mixture **mx,
			struct diag *d)
{
	struct mixture_member mm[MIXTURE_MAX_MEMBERS];
	struct mixture_params p = {
		.nmembers = s->n,
		.m = mm,
		.epoch_size = s->epoch_size,
	};

	for (uint32_t i = 0; i < s->n; i++)
		mm[i] = (struct mixture_member){ s->m[i].nshards,
						 s->m[i].records, s->m[i].how,
						 s->m[i].value };
	return mixture_new(mx, &p, d);
}

/* A pipeline spec a member may carry: one the daemon takes. */
static int check_pipeline(const char *spec, struct diag *d)
{
	struct ispec sp;

	if (strlen(spec) >= PROTO_PIPELINE_MAX)
		return diag_set(d, LOADER_EUSAGE,
				"the spec is longer than %d bytes",
				PROTO_PIPELINE_MAX - 1);
	return ispec_parse(&sp, spec, d);
}

/* --- create ------------------------------------------------------------ */

struct create_cli {
	uint64_t epoch_size;
	bool force;
};

#define O(f) offsetof(struct create_cli, f)
static const struct opt create_table[] = {
	{ "epoch-size", 0, OPT_U64, O(epoch_size), "0", "N",
	  "samples an epoch when members give proportions (0: their samples added up)",
	  0, 0, 0 },
	{ "force", 'f', OPT_FLAG, O(force), NULL, NULL,
	  "replace OUT if it exists", 0, 0, 0 },
	OPT_END,
};
#undef O

/* A positive number, all of s (NaN and infinities refused). */
static bool parse_positive(const char *s, double *v)
{
	char *end;

	errno = 0;
	*v = strtod(s, &end);
	return *s && !*end && !errno && isfinite(*v) && *v > 0;
}

/* A whole number from 1 to MIXTURE_MAX_SAMPLES, digits only. */
static bool parse_count(const char *s, double *v)
{
	unsigned long long n;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (*end || errno || n < 1 || n > MIXTURE_MAX_SAMPLES)
		return false;
	*v = (double)n;
	return true;
}

/*
 * One MEMBER argument: PATH (repeat 1), PATH=W (proportion W), or
 * PATH:KIND=V with KIND proportion, repeat or choose; then optionally
 * ":pipeline=SPEC", the spec running to the argument's end. The kind is
 * looked for after the last ':' and the weight after the last '=', so
 * an s3:// URL needs no quoting; a path that itself holds '=' takes the
 * explicit form (PATH:repeat=1). On error, the reason in why.
 */
static int parse_member(const char *arg, struct mix_member *m, char *why,
			size_t n)
{
	static const char *const kinds[] = { "proportion=", "repeat=",
					     "choose=" };
	char *s = strdup(arg), *p, *colon, *val = NULL;
	bool bare = false, from_eq = false;

	if (!s)
		return snprintf(why, n, "out of memory"), -ENOMEM;
	p = strstr(s, ":pipeline=");
	if (p) {
		*p = '\0';
		m->pipeline = strdup(p + strlen(":pipeline="));
		if (!m->pipeline)
			goto nomem;
	}
	m->how = MIXTURE_REPEAT;
	colon = strrchr(s, ':');
	for (unsigned k = 0; colon && k < 3; k++)
		if (!strncmp(colon + 1, kinds[k], strlen(kinds[k]))) {
			m->how = (enum mixture_how)k;
			*colon = '\0';
			val = colon + 1 + strlen(kinds[k]);
			break;
		}
	if (!val) {
		char *eq = strrchr(s, '=');

		if (eq) {
			*eq = '\0';
			m->how = MIXTURE_PROPORTION;
			val = eq + 1;
			from_eq = true;
		} else {
			bare = true;
			m->value = 1;
		}
	}
	if (!*s) {
		snprintf(why, n, "no path before the weight");
		goto bad;
	}
	if (!bare &&
	    !(m->how == MIXTURE_CHOOSE ? parse_count(val, &m->value) :
					 parse_positive(val, &m->value))) {
		snprintf(
			why, n, "%s \"%s\" is not %s%s", how_name[m->how], val,
			m->how == MIXTURE_CHOOSE ?
				"a whole number from 1 to 2^48" :
				"a number above 0",
			from_eq && !strchr("0123456789.+-", *val) ?
				" (a path holding \"=\" takes the form PATH:repeat=1)" :
				"");
		goto bad;
	}
	if (m->pipeline && !*m->pipeline) {
		snprintf(why, n, "an empty pipeline");
		goto bad;
	}
	m->path = s;
	return 0;
nomem:
	snprintf(why, n, "out of memory");
bad:
	free(m->pipeline);
	m->pipeline = NULL;
	free(s);
	return LOADER_EUSAGE;
}

/* The weight of argument arg, for messages: "repeat 1 (a bare path)". */
static void weight_text(const struct mix_member *m, const char *arg, char *buf,
			size_t n)
{
	bool bare = m->how == MIXTURE_REPEAT && !strchr(arg, '=');

	snprintf(buf, n, "%s %g%s", how_name[m->how], m->value,
		 bare ? " (a bare path)" : "");
}

/*
 * What the file stores for a member given as path (from the current
 * directory): the path from outdir (a real path) when it lies under it,
 * else its absolute real path; a URL as it is. A glob's directory is
 * resolved and its file-name pattern kept.
 */
static int stored_path(const char *path, const char *outdir, char **out,
		       struct diag *d)
{
	char real[PATH_MAX], *pattern = NULL, *dir = NULL, *slash;
	const char *rel;
	size_t len = strlen(outdir);
	struct stat st;
	int err = 0;

	if (aws_is_url(path)) {
		*out = strdup(path);
		return *out ? 0 : diag_set(d, -ENOMEM, "out of memory");
	}
	if (stat(path, &st) && has_glob(path)) {
		dir = strdup(path);
		if (!dir)
			return diag_set(d, -ENOMEM, "out of memory");
		slash = strrchr(dir, '/');
		pattern = slash ? slash + 1 : dir;
		if (slash)
			*slash = '\0';
		if (has_glob(slash ? dir : "")) {
			free(dir);
			return diag_set(d, LOADER_EUSAGE,
					"%s: a glob may match file names only",
					path);
		}
		path = slash ? (*dir ? dir : "/") : ".";
	}
	if (!realpath(path, real)) {
		err = diag_set(d, -errno, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!strcmp(real, outdir))
		rel = ".";
	else if (!strcmp(outdir, "/"))
		rel = real + 1;
	else if (!strncmp(real, outdir, len) && real[len] == '/')
		rel = real + len + 1;
	else
		rel = real;
	if (!pattern)
		*out = strdup(rel);
	else if (!strcmp(rel, "."))
		*out = strdup(pattern);
	else if (asprintf(out, "%s%s%s", rel, !strcmp(rel, "/") ? "" : "/",
			  pattern) < 0)
		*out = NULL;
	if (!*out)
		err = diag_set(d, -ENOMEM, "out of memory");
out:
	free(dir);
	return err;
}

/* The real path of the directory that holds file. */
static int out_dir(const char *file, char *real, struct diag *d)
{
	char *copy = strdup(file), *slash;
	const char *dir;
	int err = 0;

	if (!copy)
		return diag_set(d, -ENOMEM, "out of memory");
	slash = strrchr(copy, '/');
	if (slash)
		*slash = '\0';
	dir = !slash ? "." : *copy ? copy : "/";
	if (!realpath(dir, real))
		err = diag_set(d, -errno, "%s: %s", dir, strerror(errno));
	free(copy);
	return err;
}

/*
 * A number as the file keeps it: a whole one as a JSON integer, else a
 * real, which json_dumpf() prints to the digits *prec asks; *prec grows
 * to the fewest digits that read back as v, so that the file holds the
 * value given and not a neighbour (a count at a boundary would move).
 */
static json_t *number(double v, int *prec)
{
	char buf[40];

	if (v == floor(v) && v < 9007199254740992.0)
		return json_integer((json_int_t)v);
	for (int p = 1; p <= 17; p++) {
		snprintf(buf, sizeof(buf), "%.*g", p, v);
		if (strtod(buf, NULL) == v) {
			if (p > *prec)
				*prec = p;
			break;
		}
	}
	return json_real(v);
}

static json_t *set_json(const struct mix_set *s, int *prec)
{
	json_t *j = json_object(), *a = json_array();

	json_object_set_new(j, "format", json_string(MIXFILE_FORMAT));
	json_object_set_new(j, "version", json_integer(MIXFILE_VERSION));
	/* Only where it may be: beside proportions. */
	if (s->m[0].how == MIXTURE_PROPORTION)
		json_object_set_new(j, "epoch_size",
				    json_integer((json_int_t)s->epoch_size));
	for (uint32_t i = 0; i < s->n; i++) {
		json_t *m = json_object();

		json_object_set_new(m, "path", json_string(s->m[i].path));
		json_object_set_new(m, how_name[s->m[i].how],
				    number(s->m[i].value, prec));
		if (s->m[i].pipeline)
			json_object_set_new(m, "pipeline",
					    json_string(s->m[i].pipeline));
		json_array_append_new(a, m);
	}
	json_object_set_new(j, "members", a);
	return j;
}

/*
 * Write j to out through a temporary file beside it, renamed over it
 * only with force: a refused or failed create leaves out as it was.
 */
static int write_atomic(const char *out, json_t *j, int prec, bool force,
			struct diag *d)
{
	char *tmp = NULL;
	mode_t mask = umask(0);
	FILE *f = NULL;
	int fd, err = 0;

	umask(mask);
	if (asprintf(&tmp, "%s.XXXXXX", out) < 0)
		return diag_set(d, -ENOMEM, "out of memory");
	fd = mkstemp(tmp);
	if (fd < 0) {
		err = diag_set(d, -errno, "%s: %s", tmp, strerror(errno));
		free(tmp);
		return err;
	}
	f = fdopen(fd, "w");
	if (!f) {
		err = diag_set(d, -errno, "%s: %s", tmp, strerror(errno));
		close(fd);
		goto out;
	}
	if (json_dumpf(j, f,
		       JSON_INDENT(2) | JSON_PRESERVE_ORDER |
			       JSON_REAL_PRECISION(prec)) ||
	    fputc('\n', f) == EOF || fflush(f) || fchmod(fd, 0666 & ~mask) ||
	    fsync(fd)) {
		err = diag_set(d, -errno ? -errno : -EIO, "%s: %s", tmp,
			       strerror(errno ? errno : EIO));
		goto out;
	}
	if (fclose(f)) {
		f = NULL;
		err = diag_set(d, -errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	f = NULL;
	/*
	 * Without force, a link fails where out has come to exist since
	 * it was checked; rename() would replace it.
	 */
	if (force ? rename(tmp, out) : link(tmp, out))
		err = errno == EEXIST ?
			      diag_set(d, -EEXIST,
				       "%s exists; pass --force to replace it",
				       out) :
			      diag_set(d, -errno, "%s: %s", out,
				       strerror(errno));
out:
	if (f)
		fclose(f);
	if (err || !force)
		unlink(tmp);
	free(tmp);
	return err;
}

static int mix_create(int argc, char **argv)
{
	static const char usage[] =
		"loaderctl mix create [--epoch-size N] [--force] OUT.json MEMBER...";
	static const char about[] =
		"Write the mixture file OUT.json: a stream over the MEMBER datasets, each\n"
		"giving an epoch a number of samples set as Mosaic Streaming sets it:\n"
		"  PATH                  repeat 1: each of its samples once an epoch\n"
		"  PATH=W                proportion W (the same as PATH:proportion=W)\n"
		"  PATH:proportion=W     W of the epoch, over the proportions' sum\n"
		"  PATH:repeat=R         R times its samples (R > 0; 0.5: half of them)\n"
		"  PATH:choose=N         N samples (a whole number)\n"
		"Either every member gives a proportion or none does. Any form may end\n"
		"in :pipeline=SPEC, the member's own image pipeline (spaces allowed, to\n"
		"the argument's end). PATH is a dataset directory, a directory of .tar\n"
		"files, a .tar file or a glob of them, an LMDB database, or an s3:// URL;\n"
		"a local one must open as a dataset (s3:// members are not checked). It\n"
		"is stored relative to OUT's directory when it lies under it, else\n"
		"absolute. A path holding '=' takes the explicit form (PATH:repeat=1).\n"
		"OUT is written whole or not at all, and replaced only with --force.";
	struct create_cli o = { 0 };
	struct mix_set s = { 0 };
	char outdir[PATH_MAX], why[DIAG_MAX];
	struct diag d = { "" };
	struct mixture *mx = NULL;
	json_t *j = NULL;
	int nargs, help, err, prec = 1, rc = CTL_FAIL;
	bool all_read = true;
	struct stat st;
	const char *out;

	err = opts_parse(create_table, &o, argc, argv, &nargs, &help, &d);
	if (help) {
		opts_help(stdout, usage, about, create_table);
		return CTL_OK;
	}
	if (err || nargs < 2) {
		fprintf(stderr,
			"loaderctl mix create: %s\nusage: %s (--help for the forms of MEMBER)\n",
			err ? d.msg :
			      "expected OUT.json and at least one MEMBER",
			usage);
		return CTL_FAIL;
	}
	out = argv[0];
	if (nargs - 1 > MIXTURE_MAX_MEMBERS) {
		fprintf(stderr,
			"loaderctl mix create: %d members; a mixture has at most %d\n",
			nargs - 1, MIXTURE_MAX_MEMBERS);
		return CTL_FAIL;
	}
	for (int i = 1; i < nargs; i++) {
		struct mix_member *m = &s.m[s.n];

		if (parse_member(argv[i], m, why, sizeof(why))) {
			fprintf(stderr, "loaderctl mix create: \"%s\": %s\n",
				argv[i], why);
			goto out;
		}
		s.n++;
		if ((m->how == MIXTURE_PROPORTION) !=
		    (s.m[0].how == MIXTURE_PROPORTION)) {
			char a[64], b[64];

			weight_text(m, argv[i], a, sizeof(a));
			weight_text(&s.m[0], argv[1], b, sizeof(b));
			fprintf(stderr,
				"loaderctl mix create: \"%s\": %s beside \"%s\"'s %s: either every member gives a proportion or none does\n",
				argv[i], a, argv[1], b);
			goto out;
		}
		if (m->pipeline && check_pipeline(m->pipeline, &d)) {
			fprintf(stderr,
				"loaderctl mix create: \"%s\": pipeline: %s\n",
				argv[i], d.msg);
			goto out;
		}
	}
	if (o.epoch_size && s.m[0].how != MIXTURE_PROPORTION) {
		fprintf(stderr,
			"loaderctl mix create: --epoch-size goes with proportions; the members give repeat or choose\n");
		goto out;
	}
	s.epoch_size = o.epoch_size;
	/* Before any work: an existing OUT is kept unless --force. */
	if (!o.force && !lstat(out, &st)) {
		fprintf(stderr,
			"loaderctl mix create: %s exists; pass --force to replace it\n",
			out);
		goto out;
	}
	if (out_dir(out, outdir, &d)) {
		fprintf(stderr, "loaderctl mix create: %s\n", d.msg);
		goto out;
	}
	for (uint32_t i = 0; i < s.n; i++) {
		struct mix_member *m = &s.m[i];

		m->where = m->path;
		m->path = NULL;
		if (member_open(m, false, &d) ||
		    stored_path(m->where, outdir, &m->path, &d)) {
			fprintf(stderr, "loaderctl mix create: \"%s\": %s\n",
				argv[1 + i], d.msg);
			goto out;
		}
		all_read = all_read && m->read;
	}
	if (all_read && make_mixture(&s, &mx, &d)) {
		fprintf(stderr, "loaderctl mix create: %s\n", d.msg);
		goto out;
	}
	j = set_json(&s, &prec);
	if (!j || write_atomic(out, j, prec, o.force, &d)) {
		fprintf(stderr, "loaderctl mix create: %s\n",
			j ? d.msg : "out of memory");
		goto out;
	}
	rc = CTL_OK;
out:
	json_decref(j);
	mixture_free(mx);
	set_free(&s);
	return rc;
}

/* --- inspect ----------------------------------------------------------- */

struct inspect_cli {
	bool json;
};

#define O(f) offsetof(struct inspect_cli, f)
static const struct opt inspect_table[] = {
	{ "json", 0, OPT_FLAG, O(json), NULL, NULL, "print JSON", 0, 0, 0 },
	OPT_END,
};
#undef O

/*
 * Read file into s with the reader loader_open() uses (client/mixfile.h),
 * so that inspect takes a file as a stream's client takes it; then check
 * what that reader leaves to loader_make_members() and the stream, before
 * any member is opened (tars are scanned): the kinds do not mix, an
 * epoch_size goes with proportions, a choose is at most 2^48, and a
 * pipeline is one the daemon takes. Every reason names the file, and the
 * member and key at fault.
 */
static int read_set(const char *file, struct mix_set *s, struct diag *d)
{
	struct loader_mixfile mf;
	int err;

	err = loader_mixfile_load(&mf, file, d->msg, sizeof(d->msg));
	if (err)
		return err;
	s->epoch_size = mf.epoch_size;
	for (uint32_t i = 0; i < mf.nmembers; i++) {
		struct loader_member *lm = &mf.m[i];
		struct mix_member *m = &s->m[i];

		/*
		 * The strings move to s (set_free() frees them): mf is left
		 * NULL in their place, which loader_mixfile_free() passes.
		 */
		m->path = mf.path[i];
		m->where = (char *)lm->dataset;
		m->pipeline = (char *)lm->pipeline;
		mf.path[i] = NULL;
		lm->dataset = lm->pipeline = NULL;
		m->how = (enum mixture_how)lm->how;
		m->value = lm->value;
		s->n = i + 1;
		if ((m->how == MIXTURE_PROPORTION) !=
		    (s->m[0].how == MIXTURE_PROPORTION)) {
			err = diag_set(
				d, LOADER_EFORMAT,
				"%s: member %u: \"%s\" beside member 0's \"%s\": either every member gives a proportion or none does",
				file, i, how_name[m->how],
				how_name[s->m[0].how]);
			goto out;
		}
		if (m->how == MIXTURE_CHOOSE &&
		    m->value > MIXTURE_MAX_SAMPLES) {
			err = diag_set(
				d, LOADER_EFORMAT,
				"%s: member %u: \"choose\" is not a whole number from 1 to 2^48",
				file, i);
			goto out;
		}
		if (m->pipeline && check_pipeline(m->pipeline, d)) {
			err = diag_wrap(d, LOADER_EFORMAT,
					"%s: member %u: \"pipeline\"", file, i);
			goto out;
		}
	}
	if (s->epoch_size && s->m[0].how != MIXTURE_PROPORTION)
		err = diag_set(
			d, LOADER_EFORMAT,
			"%s: \"epoch_size\": %" PRIu64
			" goes with proportions; the members give repeat or choose",
			file, s->epoch_size);
out:
	loader_mixfile_free(&mf);
	return err;
}

static json_t *count_json(bool known_, uint64_t v)
{
	return known_ ? json_integer((json_int_t)v) : json_null();
}

static void print_json(const char *file, const struct mix_set *s,
		       const struct mixture *mx)
{
	json_t *j = json_object(), *a = json_array();
	uint64_t e = mx ? mixture_size(mx) : 0;

	json_object_set_new(j, "mixture", json_string(file));
	json_object_set_new(j, "epoch_size",
			    json_integer((json_int_t)s->epoch_size));
	json_object_set_new(j, "samples", count_json(mx != NULL, e));
	for (uint32_t i = 0; i < s->n; i++) {
		const struct mix_member *m = &s->m[i];
		uint64_t c = mx ? mixture_count(mx, i) : 0;
		json_t *o = json_object();

		json_object_set_new(o, "path", json_string(m->path));
		json_object_set_new(o, "resolved", json_string(m->where));
		json_object_set_new(o, "format", json_string(m->format));
		json_object_set_new(o, "kind", json_string(how_name[m->how]));
		json_object_set_new(o, "value",
				    m->how == MIXTURE_CHOOSE ?
					    json_integer((json_int_t)m->value) :
					    json_real(m->value));
		json_object_set_new(o, "pipeline",
				    m->pipeline ? json_string(m->pipeline) :
						  json_null());
		json_object_set_new(o, "samples",
				    count_json(m->read, m->samples));
		json_object_set_new(o, "count", count_json(mx != NULL, c));
		json_object_set_new(o, "share",
				    mx ? json_real((double)c / (double)e) :
					 json_null());
		json_object_set_new(
			o, "copies",
			count_json(mx != NULL, mx ? c / m->samples : 0));
		json_object_set_new(
			o, "remainder",
			count_json(mx != NULL, mx ? c % m->samples : 0));
		json_array_append_new(a, o);
	}
	json_object_set_new(j, "members", a);
	json_dumpf(j, stdout,
		   JSON_INDENT(2) | JSON_PRESERVE_ORDER | CTL_JSON_REAL);
	printf("\n");
	json_decref(j);
}

static void print_text(const char *file, const struct mix_set *s,
		       const struct mixture *mx, uint32_t unread)
{
	uint64_t e = mx ? mixture_size(mx) : 0;

	printf("mixture:  %s\n", file);
	printf("members:  %u, %s\n", s->n,
	       s->m[0].how == MIXTURE_PROPORTION ?
		       "by proportion" :
		       "by repeat and choose (their own amounts)");
	printf("  %2s  %-10s %10s %12s %12s %7s  %s\n", "#", "kind", "value",
	       "samples", "per epoch", "share", "path");
	for (uint32_t i = 0; i < s->n; i++) {
		const struct mix_member *m = &s->m[i];
		char n[24] = "not read", c[24] = "?", sh[16] = "?";

		if (m->read)
			snprintf(n, sizeof(n), "%" PRIu64, m->samples);
		if (mx) {
			snprintf(c, sizeof(c), "%" PRIu64,
				 mixture_count(mx, i));
			snprintf(sh, sizeof(sh), "%.2f%%",
				 100.0 * (double)mixture_count(mx, i) /
					 (double)e);
		}
		printf("  %2u  %-10s %10g %12s %12s %7s  %s (%s)\n", i,
		       how_name[m->how], m->value, n, c, sh, m->path,
		       m->format);
		if (m->pipeline)
			printf("  %2s  pipeline: %s\n", "", m->pipeline);
	}
	if (!mx) {
		printf("epoch:    not computed: member %u is in an object store, whose samples are not read here\n",
		       unread);
		return;
	}
	printf("epoch:    %" PRIu64 " samples", e);
	if (s->m[0].how != MIXTURE_PROPORTION)
		printf(" (what the members give)\n");
	else if (s->epoch_size)
		printf(" (the file's epoch_size)\n");
	else
		printf(" (the members' samples added up)\n");
}

static int mix_inspect(int argc, char **argv)
{
	static const char usage[] = "loaderctl mix inspect [--json] FILE.json";
	struct inspect_cli o = { 0 };
	struct mix_set s = { 0 };
	struct diag d = { "" };
	struct mixture *mx = NULL;
	uint32_t unread = UINT32_MAX;
	int nargs, help, err, rc = CTL_FAIL;
	const char *file;

	err = opts_parse(inspect_table, &o, argc, argv, &nargs, &help, &d);
	if (help) {
		opts_help(
			stdout, usage,
			"Show what each epoch of the mixture FILE.json holds: each member's\n"
			"path, how it is weighted, its samples (read from its manifest, or by\n"
			"a scan of its tars or LMDB database; an s3:// member's are not read),\n"
			"and the samples it gives an epoch and their share, as a stream counts\n"
			"them; then the epoch's size.",
			inspect_table);
		return CTL_OK;
	}
	if (err || nargs != 1) {
		fprintf(stderr,
			"loaderctl mix inspect: %s\nusage: %s (--help for options)\n",
			err ? d.msg : "expected one mixture file", usage);
		return CTL_FAIL;
	}
	file = argv[0];
	if (read_set(file, &s, &d)) {
		fprintf(stderr, "loaderctl mix inspect: %s\n", d.msg);
		goto out;
	}
	for (uint32_t i = 0; i < s.n; i++) {
		if (member_open(&s.m[i], true, &d)) {
			fprintf(stderr,
				"loaderctl mix inspect: %s: member %u: \"path\": %s\n",
				file, i, d.msg);
			goto out;
		}
		if (!s.m[i].read && unread == UINT32_MAX)
			unread = i;
	}
	if (unread == UINT32_MAX && make_mixture(&s, &mx, &d)) {
		fprintf(stderr, "loaderctl mix inspect: %s: %s\n", file, d.msg);
		goto out;
	}
	if (o.json)
		print_json(file, &s, mx);
	else
		print_text(file, &s, mx, unread);
	rc = CTL_OK;
out:
	mixture_free(mx);
	set_free(&s);
	return rc;
}

static const struct ctl_cmd mix_cmds[] = {
	{ "create", mix_create,
	  "write a mixture file: member datasets and their weights" },
	{ "inspect", mix_inspect,
	  "what each epoch of a mixture holds, member by member" },
	{ NULL, NULL, NULL },
};

int ctl_mix(int argc, char **argv)
{
	return ctl_dispatch(mix_cmds, "loaderctl mix", "subcommand",
			    "SUBCOMMAND", argc, argv);
}
