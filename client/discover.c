/*
 * discover.c - find a dataset's files and send them to loaderd: a
 * directory made by loaderctl pack (its manifest and shards), WebDataset
 * .tar files, an LMDB environment, or an s3:// URL (REMOTE); and the
 * positions of an earlier world (POSITIONS).
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "awscfg.h"
#include "discover.h"
#include "dsfiles.h"
#include "libloader_priv.h"
#include "mixfile.h"
#include "msg.h"
#include "proto.h"

static bool loader_plain_name(const char *s)
{
	return *s && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

/*
 * Open a file of the dataset with the caller's permissions: that is the
 * whole point of passing descriptors. O_NONBLOCK keeps a FIFO planted in
 * the dataset from hanging the open; a regular file ignores it, and it is
 * cleared again before the daemon gets the descriptor.
 */
static int loader_open_file(struct loader *l, int dfd, const char *dataset,
			    const char *name, int *out)
{
	struct stat st;
	int fd, fl;

	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return loader_fail(l, -errno, "%s/%s: %s", dataset, name,
				   strerror(errno));
	if (fstat(fd, &st)) {
		int err = -errno;

		close(fd);
		return loader_fail(l, err, "%s/%s: %s", dataset, name,
				   strerror(-err));
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return loader_fail(l, LOADER_EFORMAT,
				   "%s/%s: not a regular file", dataset, name);
	}
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK)) {
		int err = -errno;

		close(fd);
		return loader_fail(l, err, "%s/%s: fcntl: %s", dataset, name,
				   strerror(-err));
	}
	*out = fd;
	return 0;
}

/*
 * The shard names, from the manifest read through the very descriptor
 * that the daemon will get, so that both read the same file.
 */
static int loader_manifest(struct loader *l, int mfd, const char *dataset,
			   json_t **rootp, json_t **shardsp)
{
	json_error_t je;
	json_t *root, *j, *v;
	size_t k;
	int err;

	root = json_loadfd(mfd, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return loader_fail(l, LOADER_EFORMAT, "%s/%s: line %d: %s",
				   dataset, DSFILES_MANIFEST, je.line, je.text);
	/*
	 * The daemon shares this descriptor's file offset: leave it where
	 * a reader that uses read() would expect it.
	 */
	if (lseek(mfd, 0, SEEK_SET) < 0) {
		err = loader_fail(l, -errno, "%s/%s: lseek: %s", dataset,
				  DSFILES_MANIFEST, strerror(errno));
		goto fail;
	}
	j = json_object_get(root, "format");
	if (!json_is_string(j) ||
	    strcmp(json_string_value(j), DSFILES_FORMAT)) {
		err = loader_fail(l, LOADER_EFORMAT,
				  "%s/%s: \"format\" is not \"%s\"", dataset,
				  DSFILES_MANIFEST, DSFILES_FORMAT);
		goto fail;
	}
	j = json_object_get(root, "version");
	if (!json_is_integer(j) || json_integer_value(j) != DSFILES_VERSION) {
		err = loader_fail(l, LOADER_EVERSION,
				  "%s/%s: \"version\" is not %d", dataset,
				  DSFILES_MANIFEST, DSFILES_VERSION);
		goto fail;
	}
	j = json_object_get(root, "shards");
	if (!json_is_array(j)) {
		err = loader_fail(l, LOADER_EFORMAT,
				  "%s/%s: \"shards\" is not an array", dataset,
				  DSFILES_MANIFEST);
		goto fail;
	}
	if (json_array_size(j) > PROTO_MAX_FILES - 1) {
		err = loader_fail(l, LOADER_ETOOBIG,
				  "%s/%s: %zu shards, at most %u", dataset,
				  DSFILES_MANIFEST, json_array_size(j),
				  PROTO_MAX_FILES - 1);
		goto fail;
	}
	/* Check every name before opening any file. */
	json_array_foreach(j, k, v)
	{
		json_t *f = json_object_get(v, "file");

		if (!json_is_string(f) ||
		    !loader_plain_name(json_string_value(f))) {
			err = loader_fail(
				l, LOADER_EFORMAT,
				"%s/%s: shard %zu: \"file\" is not a plain file name",
				dataset, DSFILES_MANIFEST, k);
			goto fail;
		}
	}
	*rootp = root;
	*shardsp = j;
	return 0;
fail:
	json_decref(root);
	return err;
}

/* An LMDB data file: its meta page's magic (dsfiles.h). */
static bool loader_is_lmdb_file(const char *path)
{
	unsigned char m[DSFILES_LMDB_META];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	bool ok;

	if (fd < 0)
		return false;
	ok = pread(fd, m, sizeof(m), 0) == (ssize_t)sizeof(m) &&
	     dsfiles_lmdb_meta(m);
	close(fd);
	return ok;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * A WebDataset dataset, read in place (loaderd(8), TAR DATASETS): the
 * .tar files of directory dfd, sorted by name, into *names (*n; the
 * caller frees them and the array).
 */
static int loader_list_tars(struct loader *l, int dfd, const char *dataset,
			    char ***names, size_t *n)
{
	DIR *dir;
	struct dirent *e;
	size_t cap = 0;
	int fd = dup(dfd), err = 0;

	*names = NULL;
	*n = 0;
	dir = fd < 0 ? NULL : fdopendir(fd);
	if (!dir) {
		err = -errno;
		if (fd >= 0)
			close(fd);
		return loader_fail(l, err, "%s: %s", dataset, strerror(-err));
	}
	while ((e = readdir(dir))) {
		if (!dsfiles_tar_name(e->d_name))
			continue;
		if (*n == cap) {
			char **p = realloc(*names, (cap ? cap * 2 : 64) *
							   sizeof(**names));

			if (!p) {
				err = -ENOMEM;
				break;
			}
			*names = p;
			cap = cap ? cap * 2 : 64;
		}
		if (*n + 1 >= PROTO_MAX_FILES ||
		    !((*names)[*n] = strdup(e->d_name))) {
			err = *n + 1 >= PROTO_MAX_FILES ? -E2BIG : -ENOMEM;
			break;
		}
		(*n)++;
	}
	closedir(dir);
	if (!err && !*n)
		err = loader_fail(
			l, LOADER_EFORMAT,
			"%s: no %s and no .tar files: not a dataset (loaderctl pack makes one; a directory of WebDataset .tar shards is read as it is)",
			dataset, DSFILES_MANIFEST);
	else if (err)
		err = loader_fail(l, err, "%s: listing .tar files: %s", dataset,
				  strerror(-err));
	else
		qsort(*names, *n, sizeof(**names), cmp_names);
	return err;
}

/*
 * For a tar dataset, file 0 is not a manifest but the tars' names, one
 * a line after a first line PROTO_TARS_MAGIC, in a sealed memfd: labels
 * for the daemon's messages, never paths it opens.
 */
static int loader_tar_names(struct loader *l, char **names, size_t n, int *out)
{
	int fd = memfd_create("loader-tars", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	FILE *f;
	int err = 0;

	if (fd < 0)
		return loader_fail(l, -errno, "memfd_create: %s",
				   strerror(errno));
	f = fdopen(dup(fd), "w");
	if (!f) {
		err = -errno;
		close(fd);
		return loader_fail(l, err, "fdopen: %s", strerror(-err));
	}
	fputs(PROTO_TARS_MAGIC, f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s\n", names[i]);
	if (fclose(f))
		err = -EIO;
	if (!err &&
	    fcntl(fd, F_ADD_SEALS,
		  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL))
		err = -errno;
	if (err) {
		close(fd);
		return loader_fail(l, err, "the tars' names: %s",
				   strerror(-err));
	}
	*out = fd;
	return 0;
}

/*
 * An s3:// dataset: where it is and the caller's credentials, resolved
 * here, in the caller's process (common/awscfg.h), and sent in one
 * REMOTE message instead of FILES. The copies are wiped before return.
 */
static int loader_send_remote(struct loader *l, const char *url,
			      uint32_t *first_seq, uint32_t *flags)
{
	char bucket[AWS_BUCKET_MAX], prefix[AWS_PREFIX_MAX];
	struct proto_remote *r = calloc(1, sizeof(*r));
	struct aws_cfg *c = calloc(1, sizeof(*c));
	struct diag d;
	int err;

	if (!r || !c) {
		err = loader_fail(l, -ENOMEM, "out of memory");
		goto out;
	}
	err = aws_url_parse(url, bucket, prefix, &d);
	if (!err)
		err = aws_cfg_resolve(c, NULL, &d);
	if (err) {
		err = loader_fail(l, err, "%s", d.msg);
		goto out;
	}
	snprintf(r->url, sizeof(r->url), "s3://%s%s%s", bucket,
		 prefix[0] ? "/" : "", prefix);
	memcpy(r->endpoint, c->endpoint, sizeof(r->endpoint));
	memcpy(r->region, c->region, sizeof(r->region));
	memcpy(r->access_key, c->access_key, sizeof(r->access_key));
	memcpy(r->secret_key, c->secret_key, sizeof(r->secret_key));
	memcpy(r->session_token, c->session_token, sizeof(r->session_token));
	r->addressing = (uint32_t)c->addressing;
	*first_seq = l->seq + 1;
	err = msg_send(l->sock, PROTO_REMOTE, ++l->seq, r, sizeof(*r), NULL, 0);
	if (err)
		err = loader_send_failed(l, err, PROTO_REMOTE);
	else
		*flags = PROTO_OPEN_REMOTE;
out:
	if (c)
		aws_cfg_wipe(c);
	if (r)
		explicit_bzero(r, sizeof(*r));
	free(c);
	free(r);
	return err;
}

/* Where the earlier world's ranks stopped: POSITIONS, in rank order. */
int loader_send_positions(struct loader *l, const struct loader_opts *o)
{
	struct proto_positions *m = calloc(1, sizeof(*m));
	int err = 0;

	if (!m)
		return loader_fail(l, -ENOMEM, "out of memory");
	for (uint32_t first = 0; !err && first < o->from_world;) {
		uint32_t n = o->from_world - first;

		if (n > PROTO_POSITIONS_MAX)
			n = PROTO_POSITIONS_MAX;
		m->world = o->from_world;
		m->first = first;
		m->count = n;
		m->plan = o->from_plan;
		m->plan_end = o->from_plan_end;
		for (uint32_t i = 0; i < n; i++)
			m->pos[i] = (struct proto_position){
				.epoch = o->from_epoch[first + i],
				.batch = o->from_batch[first + i],
			};
		err = msg_send(l->sock, PROTO_POSITIONS, ++l->seq, m,
			       sizeof(*m), NULL, 0);
		if (err)
			err = loader_send_failed(l, err, PROTO_POSITIONS);
		first += n;
	}
	free(m);
	return err;
}

/*
 * Send file 0 (manifest.json, or for tars their names) and the shards
 * (1..n, manifest order, or the tars by name) in FILES messages of at
 * most l->max_fds descriptors. Each batch is opened, sent and closed
 * before the next, so a dataset of any size needs only max_fds
 * descriptors at a time here. dataset is a directory made by loaderctl
 * pack, a directory of .tar files, or one .tar file (*flags gets
 * PROTO_OPEN_TAR for those). Returns the seq of the first FILES message
 * in *first_seq.
 */
int loader_send_files(struct loader *l, const char *dataset,
		      uint32_t *first_seq, uint32_t *flags)
{
	int fds[PROTO_MAX_FDS];
	struct proto_files pf;
	json_t *root = NULL, *shards = NULL;
	char **names = NULL, *copy = NULL;
	const char *where = dataset;
	unsigned count = 0;
	size_t total, idx = 0, nnames = 0;
	struct stat st;
	int dfd, mfd = -1, err;
	bool tar = false, lmdb = false;

	*flags = 0;
	if (aws_is_url(dataset))
		return loader_send_remote(l, dataset, first_seq, flags);
	if (!stat(dataset, &st) && S_ISREG(st.st_mode)) {
		/* One .tar file (or LMDB data file): its directory, and it. */
		char *slash;

		copy = strdup(dataset);
		names = malloc(sizeof(*names));
		if (!copy || !names || !(names[0] = strdup(dataset))) {
			free(copy);
			free(names);
			return loader_fail(l, -ENOMEM, "out of memory");
		}
		slash = strrchr(copy, '/');
		memmove(names[0], slash ? slash + 1 : copy,
			strlen(slash ? slash + 1 : copy) + 1);
		if (slash)
			*(slash == copy ? slash + 1 : slash) = '\0';
		where = slash ? copy : ".";
		nnames = 1;
		tar = true;
		lmdb = loader_is_lmdb_file(dataset);
	}
	dfd = open(where, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		err = loader_fail(l, -errno, "%s: %s", where, strerror(errno));
		goto out_names;
	}
	if (!tar) {
		mfd = openat(dfd, DSFILES_MANIFEST, O_RDONLY | O_CLOEXEC);
		if (mfd < 0 && errno == ENOENT &&
		    !faccessat(dfd, "data.mdb", F_OK, 0)) {
			/* An LMDB environment: its data file, read in place. */
			names = malloc(sizeof(*names));
			if (!names || !(names[0] = strdup("data.mdb"))) {
				free(names);
				names = NULL;
				err = loader_fail(l, -ENOMEM, "out of memory");
				goto out;
			}
			nnames = 1;
			tar = lmdb = true;
		} else if (mfd < 0 && errno == ENOENT) {
			err = loader_list_tars(l, dfd, dataset, &names,
					       &nnames);
			if (err)
				goto out;
			tar = true;
		} else {
			if (mfd >= 0)
				close(mfd);
			mfd = -1;
			err = loader_open_file(l, dfd, dataset,
					       DSFILES_MANIFEST, &mfd);
			if (!err)
				err = loader_manifest(l, mfd, dataset, &root,
						      &shards);
			if (err)
				goto out;
		}
	}
	if (tar) {
		err = loader_tar_names(l, names, nnames, &mfd);
		if (err)
			goto out;
		*flags = lmdb ? PROTO_OPEN_LMDB : PROTO_OPEN_TAR;
		total = nnames + 1;
	} else {
		total = json_array_size(shards) + 1;
	}
	*first_seq = l->seq + 1;
	while (idx < total) {
		count = 0;
		while (count < l->max_fds && idx < total) {
			if (idx == 0) {
				fds[count++] = mfd;
				mfd = -1;
			} else {
				const char *name =
					tar ? names[idx - 1] :
					      json_string_value(json_object_get(
						      json_array_get(shards,
								     idx - 1),
						      "file"));

				err = loader_open_file(l, dfd, where, name,
						       &fds[count]);
				if (err)
					goto out;
				count++;
			}
			idx++;
		}
		pf = (struct proto_files){
			.first = (uint32_t)(idx - count),
			.count = count,
			.total = (uint32_t)total,
		};
		err = msg_send(l->sock, PROTO_FILES, ++l->seq, &pf, sizeof(pf),
			       fds, count);
		for (unsigned i = 0; i < count; i++)
			close(fds[i]);
		count = 0;
		if (err) {
			err = loader_send_failed(l, err, PROTO_FILES);
			goto out;
		}
	}
out:
	for (unsigned i = 0; i < count; i++)
		close(fds[i]);
	if (mfd >= 0)
		close(mfd);
	json_decref(root);
	close(dfd);
out_names:
	for (size_t i = 0; i < nnames; i++)
		free(names[i]);
	free(names);
	free(copy);
	return err;
}

/*
 * Each member's files, closed by its MEMBER: what the daemon takes for
 * one dataset, once per member (proto.h, PROTO_OPEN_MIXTURE).
 */
int loader_send_members(struct loader *l, uint32_t *first_seq, bool *remote)
{
	*remote = false;
	for (uint32_t i = 0; i < l->nmembers; i++) {
		struct proto_member *pm = &l->pm[i];
		uint32_t seq = 0, flags = 0;
		int err;

		if (loader_is_mixfile(l->mpath[i]))
			return loader_fail(
				l, LOADER_EUSAGE,
				"%s%smember %" PRIu32
				": %s is a mixture file: mixtures do not nest (list its members instead)",
				l->dataset ? l->dataset : "",
				l->dataset ? ": " : "", i, l->mpath[i]);
		err = loader_send_files(l, l->mpath[i], &seq, &flags);
		if (err) {
			/* The reason is rewritten: keep a copy to quote. */
			char why[sizeof(l->reason)];

			memcpy(why, l->reason, sizeof(why));
			return loader_fail(l, err, "%s%smember %" PRIu32 ": %s",
					   l->dataset ? l->dataset : "",
					   l->dataset ? ": " : "", i, why);
		}
		if (i == 0)
			*first_seq = seq;
		if (flags & PROTO_OPEN_REMOTE)
			*remote = true;
		pm->flags = flags;
		err = msg_send(l->sock, PROTO_MEMBER, ++l->seq, pm, sizeof(*pm),
			       NULL, 0);
		if (err)
			return loader_send_failed(l, err, PROTO_MEMBER);
	}
	return 0;
}
