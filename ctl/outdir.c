/*
 * outdir.c - a dataset directory written whole or not at all (outdir.h).
 *
 * Everything here removes by name only what a pack writes (manifest.json,
 * its .tmp, shard-*.lds) and directories it made; a file it does not know
 * is never removed, so a mistake here can leave clutter but not lose
 * data. Removal goes through a directory descriptor opened without
 * following links, so that a link planted beside the target cannot
 * point the removal elsewhere.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dataset.h"
#include "loader_error.h"
#include "outdir.h"

#define OUTDIR_TMP_TAG ".pack-"
#define OUTDIR_OLD_TAG ".old-"

/* Whether name is a file a pack writes: manifest.json(.tmp), shard-*.lds. */
static bool outdir_is_pack_file(const char *name)
{
	size_t n = strlen(name);

	if (!strcmp(name, DSFILES_MANIFEST) ||
	    !strcmp(name, DSFILES_MANIFEST ".tmp"))
		return true;
	return n > 10 && !strncmp(name, "shard-", 6) &&
	       !strcmp(name + n - 4, ".lds");
}

/* Append "a/b: why" to o->note, "; " between entries. */
static void note(struct outdir *o, const char *a, const char *b,
		 const char *why)
{
	size_t n = strlen(o->note);

	snprintf(o->note + n, sizeof(o->note) - n, "%s%s%s%s: %s",
		 n ? "; " : "", a, b ? "/" : "", b ? b : "", why);
}

/* Split target into its parent and base name (both into caller's bufs). */
static int split_path(const char *target, char *parent, char *base)
{
	char a[PATH_MAX], b[PATH_MAX];

	if (snprintf(a, sizeof(a), "%s", target) >= (int)sizeof(a))
		return -ENAMETOOLONG;
	memcpy(b, a, sizeof(a));
	snprintf(parent, PATH_MAX, "%s", dirname(a));
	snprintf(base, NAME_MAX + 1, "%s", basename(b));
	return 0;
}

/*
 * mkdir -p for dir; the top-most directory made goes into made (left as
 * it is when none was).
 */
static int mkdir_p(const char *dir, char *made)
{
	char path[PATH_MAX];
	size_t n = strlen(dir);

	if (n >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, n + 1);
	for (char *c = path + 1;; c++) {
		bool end = !*c;

		if (!end && *c != '/')
			continue;
		*c = '\0';
		if (!mkdir(path, 0777)) {
			if (!made[0])
				snprintf(made, PATH_MAX, "%s", path);
		} else if (errno != EEXIST) {
			return -errno;
		}
		if (end)
			break;
		*c = '/';
	}
	return 0;
}

/*
 * Remove, inside the open directory dfd, the files a pack writes, and
 * the files that are hard links of the same name in the target (those
 * link_foreign() made): they live on there.
 */
static void clear_dir(const struct outdir *o, int dfd)
{
	int fd = dup(dfd);
	int tfd = open(o->target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
	const struct dirent *e;

	if (!dir) {
		if (fd >= 0)
			close(fd);
		goto out;
	}
	rewinddir(dir); /* the offset is shared with dfd's */
	while ((e = readdir(dir))) {
		struct stat a, b;

		if (outdir_is_pack_file(e->d_name)) {
			unlinkat(dfd, e->d_name, 0);
			continue;
		}
		if (tfd >= 0 &&
		    !fstatat(dfd, e->d_name, &a, AT_SYMLINK_NOFOLLOW) &&
		    !fstatat(tfd, e->d_name, &b, AT_SYMLINK_NOFOLLOW) &&
		    S_ISREG(a.st_mode) && a.st_ino == b.st_ino &&
		    a.st_dev == b.st_dev && a.st_nlink > 1)
			unlinkat(dfd, e->d_name, 0);
	}
	closedir(dir);
out:
	if (tfd >= 0)
		close(tfd);
}

/*
 * What a directory holds: whether a dataset (any pack file), and the
 * first entry that is a directory (or other non-file) into sub. -ENOENT
 * when it does not exist, -ENOTDIR when it is no directory.
 */
static int scan(const char *path, bool *dataset, char *sub, size_t *entries)
{
	DIR *dir = opendir(path);
	const struct dirent *e;
	struct stat st;

	*dataset = false;
	sub[0] = '\0';
	*entries = 0;
	if (!dir)
		return -errno;
	while ((e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		++*entries;
		if (outdir_is_pack_file(e->d_name)) {
			*dataset = true;
			continue;
		}
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode) && !sub[0])
			snprintf(sub, NAME_MAX + 1, "%s", e->d_name);
	}
	closedir(dir);
	return 0;
}

/* The refusals that scan()'s findings call for. */
static int check_found(const struct outdir *o, bool dataset, const char *sub,
		       struct diag *d)
{
	if (dataset && !o->force)
		return diag_set(
			d, -EEXIST,
			"%s already holds a dataset (%s); pass --force to replace it",
			o->target, DSFILES_MANIFEST);
	if (sub[0])
		return diag_set(
			d, -EISDIR,
			"%s/%s: a directory inside the dataset directory; pack builds the dataset beside it and swaps the two, so a directory there cannot stay: pack into a directory of its own, or move %s out",
			o->target, sub, sub);
	return 0;
}

/*
 * Remove the temporary directories of killed packs of the same target
 * in parent: those named .BASE.pack-* whose lock can be taken.
 */
static void sweep(struct outdir *o, const char *parent, const char *base)
{
	char prefix[NAME_MAX + 16];
	int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd;
	DIR *dir;
	const struct dirent *e;

	if (pfd < 0)
		return;
	fd = dup(pfd);
	dir = fd >= 0 ? fdopendir(fd) : NULL;
	if (!dir) {
		if (fd >= 0)
			close(fd);
		close(pfd);
		return;
	}
	snprintf(prefix, sizeof(prefix), ".%s" OUTDIR_TMP_TAG, base);
	while ((e = readdir(dir))) {
		int tfd;

		if (strncmp(e->d_name, prefix, strlen(prefix)) ||
		    strlen(e->d_name) != strlen(prefix) + 6)
			continue;
		tfd = openat(pfd, e->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (tfd < 0)
			continue;
		if (!flock(tfd, LOCK_EX | LOCK_NB)) {
			clear_dir(o, tfd);
			if (!unlinkat(pfd, e->d_name, AT_REMOVEDIR))
				note(o, parent, e->d_name,
				     "removed, left by a pack that did not finish");
		}
		close(tfd);
	}
	closedir(dir);
	close(pfd);
}

int outdir_begin(struct outdir *o, const char *target, bool force,
		 struct diag *d)
{
	char parent[PATH_MAX], base[NAME_MAX + 1], real[PATH_MAX],
		sub[NAME_MAX + 1];
	mode_t mask;
	struct stat st;
	bool dataset;
	size_t entries;
	int err;

	memset(o, 0, sizeof(*o));
	o->lockfd = -1;
	o->force = force;
	/*
	 * A target that is a symbolic link is replaced where it points: a
	 * rename would replace the link itself.
	 */
	if (!lstat(target, &st) && S_ISLNK(st.st_mode) &&
	    realpath(target, real))
		target = real;
	if (snprintf(o->target, sizeof(o->target), "%s", target) >=
		    (int)sizeof(o->target) ||
	    strlen(target) + NAME_MAX + 16 >= PATH_MAX)
		return diag_set(d, -ENAMETOOLONG, "%s: path too long", target);
	/* Trailing slashes would make the base name empty. */
	for (size_t n = strlen(o->target); n > 1 && o->target[n - 1] == '/';)
		o->target[--n] = '\0';
	err = split_path(o->target, parent, base);
	if (err || !strcmp(base, "/") || !strcmp(base, ".") ||
	    !strcmp(base, ".."))
		return diag_set(d, LOADER_EUSAGE,
				"%s: name the dataset directory itself",
				target);
	err = scan(o->target, &dataset, sub, &entries);
	if (err == -ENOTDIR)
		return diag_set(d, err, "%s: exists and is not a directory",
				o->target);
	if (err && err != -ENOENT)
		return diag_set(d, err, "%s: %s", o->target, strerror(-err));
	if (!err) {
		err = check_found(o, dataset, sub, d);
		if (err)
			return err;
	}
	err = mkdir_p(parent, o->made);
	if (err) {
		diag_set(d, err, "%s: %s", parent, strerror(-err));
		goto fail;
	}
	sweep(o, parent, base);
	if (snprintf(o->tmp, sizeof(o->tmp), "%s/.%s" OUTDIR_TMP_TAG "XXXXXX",
		     parent, base) >= (int)sizeof(o->tmp) ||
	    !mkdtemp(o->tmp)) {
		err = -errno;
		o->tmp[0] = '\0';
		diag_set(
			d, err,
			"%s: cannot make the temporary directory to pack into beside %s: %s (pack builds a dataset beside its directory, then swaps the two)",
			parent, base, strerror(-err));
		goto fail;
	}
	o->lockfd =
		open(o->tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (o->lockfd < 0 || flock(o->lockfd, LOCK_EX | LOCK_NB)) {
		err = diag_set(d, -errno, "%s: %s", o->tmp, strerror(errno));
		goto fail;
	}
	/*
	 * mkdtemp() makes it private; the dataset directory gets the mode
	 * the one it replaces had, or what mkdir would give it.
	 */
	if (!stat(o->target, &st)) {
		fchmod(o->lockfd, st.st_mode & 07777);
	} else {
		mask = umask(0);
		umask(mask);
		fchmod(o->lockfd, 0777 & ~mask);
	}
	return 0;
fail:
	outdir_abort(o);
	return err;
}

/* The old directory, now at oldpath after the swap: its files, itself. */
static void remove_old(struct outdir *o, const char *oldpath)
{
	int ofd =
		open(oldpath, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (ofd >= 0) {
		clear_dir(o, ofd);
		close(ofd);
	}
	if (rmdir(oldpath))
		note(o, oldpath, NULL,
		     errno == ENOTEMPTY ?
			     "the replaced directory, left since it holds files that are not a dataset's" :
			     strerror(errno));
}

/* Hard-link the target's own files (not a dataset's) into the new one. */
static int link_foreign(struct outdir *o, struct diag *d)
{
	DIR *dir = opendir(o->target);
	const struct dirent *e;
	int err = 0;

	if (!dir)
		return diag_set(d, -errno, "%s: %s", o->target,
				strerror(errno));
	while (!err && (e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    outdir_is_pack_file(e->d_name))
			continue;
		if (linkat(dirfd(dir), e->d_name, o->lockfd, e->d_name, 0))
			err = diag_set(
				d, -errno,
				"%s/%s: cannot keep it in the new dataset directory (link: %s); move it out of %s",
				o->target, e->d_name, strerror(errno),
				o->target);
	}
	closedir(dir);
	return err;
}

/* Without RENAME_EXCHANGE: the old one aside, then the new one in. */
static int swap_two_steps(struct outdir *o, char *oldpath, struct diag *d)
{
	char parent[PATH_MAX], base[NAME_MAX + 1];

	split_path(o->target, parent, base);
	snprintf(oldpath, PATH_MAX, "%s/.%s" OUTDIR_OLD_TAG "XXXXXX", parent,
		 base);
	/* Reserve a name; a directory may be renamed onto an empty one. */
	if (!mkdtemp(oldpath))
		return diag_set(d, -errno, "%s: %s", oldpath, strerror(errno));
	if (rename(o->target, oldpath)) {
		int err = -errno;

		rmdir(oldpath);
		return diag_set(d, err, "%s: rename: %s", o->target,
				strerror(-err));
	}
	if (rename(o->tmp, o->target)) {
		int err = -errno;

		rename(oldpath, o->target);
		return diag_set(d, err, "%s: rename: %s", o->tmp,
				strerror(-err));
	}
	return 0;
}

int outdir_commit(struct outdir *o, struct diag *d)
{
	char parent[PATH_MAX], base[NAME_MAX + 1], sub[NAME_MAX + 1];
	char oldpath[PATH_MAX];
	bool dataset;
	size_t entries;
	int err, pfd;

	/* The new files and the directory reach the disk before the swap. */
	if (fsync(o->lockfd))
		return diag_set(d, -errno, "%s: fsync: %s", o->tmp,
				strerror(errno));
	split_path(o->target, parent, base);
	if (!renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->target, RENAME_NOREPLACE))
		goto done;
	err = errno;
	/* A file system without RENAME_NOREPLACE, and nothing there yet. */
	if (err == EINVAL && access(o->target, F_OK) && errno == ENOENT) {
		if (!rename(o->tmp, o->target))
			goto done;
		err = errno;
	}
	if (err != EEXIST && err != ENOTEMPTY && err != EINVAL)
		return diag_set(d, -err, "%s: rename to %s: %s", o->tmp,
				o->target, strerror(err));
	/* Something is there: look again, it may have changed since begin. */
	err = scan(o->target, &dataset, sub, &entries);
	if (err)
		return diag_set(d, err, "%s: %s", o->target, strerror(-err));
	err = check_found(o, dataset, sub, d);
	if (err)
		return err;
	if (!entries && !rename(o->tmp, o->target))
		goto done;
	err = link_foreign(o, d);
	if (err)
		return err;
	snprintf(oldpath, sizeof(oldpath), "%s", o->tmp);
	if (renameat2(AT_FDCWD, o->tmp, AT_FDCWD, o->target, RENAME_EXCHANGE)) {
		if (errno != EINVAL && errno != ENOSYS)
			return diag_set(d, -errno, "%s: exchange with %s: %s",
					o->tmp, o->target, strerror(errno));
		err = swap_two_steps(o, oldpath, d);
		if (err)
			return err;
	}
	/* The new dataset is in place; the old one may go. */
	close(o->lockfd);
	o->lockfd = -1;
	o->tmp[0] = '\0';
	remove_old(o, oldpath);
	goto synced;
done:
	close(o->lockfd);
	o->lockfd = -1;
	o->tmp[0] = '\0';
synced:
	pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd >= 0) {
		fsync(pfd);
		close(pfd);
	}
	o->made[0] = '\0';
	return 0;
}

void outdir_abort(struct outdir *o)
{
	char path[PATH_MAX];

	if (o->tmp[0]) {
		if (o->lockfd >= 0) {
			clear_dir(o, o->lockfd);
			close(o->lockfd);
		}
		rmdir(o->tmp);
		o->tmp[0] = '\0';
		o->lockfd = -1;
	}
	/* The parents made, deepest first, up to the top-most one made. */
	if (!o->made[0])
		return;
	snprintf(path, sizeof(path), "%s", o->target);
	for (;;) {
		char *slash = strrchr(path, '/');

		if (!slash || slash == path)
			break;
		*slash = '\0';
		if (strlen(path) < strlen(o->made) || rmdir(path))
			break;
		if (!strcmp(path, o->made))
			break;
	}
	o->made[0] = '\0';
}
