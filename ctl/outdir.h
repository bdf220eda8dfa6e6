/*
 * outdir.h - a dataset directory written whole or not at all.
 *
 * pack never writes into the directory it was given. It builds the new
 * dataset in a temporary directory beside it, ".NAME.pack-XXXXXX" in the
 * same parent (so on the same file system), and swaps it in with one
 * rename(2):
 *
 *   outdir_begin()   check the target (a dataset already there is
 *                    refused unless forced), make its parent, remove the
 *                    temporaries of packs that were killed, make and
 *                    lock the temporary directory;
 *   ...              write the dataset into o->tmp;
 *   outdir_commit()  swap it in: renamed onto an absent or empty target,
 *                    else exchanged with it (renameat2 RENAME_EXCHANGE),
 *                    after which the old dataset's files are removed;
 *   outdir_abort()   remove the temporary directory and the directories
 *                    outdir_begin() made, and nothing else.
 *
 * So the target holds, at every moment, the whole old dataset or the
 * whole new one. Files in the target that are not a dataset's (a README)
 * are hard-linked into the new directory before the swap; a directory
 * there is refused, since it could not move with the swap atomically.
 *
 * A pack killed before its swap leaves only its temporary directory,
 * which the next outdir_begin() for the same target removes: each
 * temporary directory is flock(2)ed while its pack runs, so a lock that
 * can be taken marks one whose pack is gone. One killed after the swap
 * leaves the old dataset's files there, removed the same way.
 *
 * On a file system without RENAME_EXCHANGE (NFS), the old directory is
 * first renamed aside (".NAME.old-XXXXXX"), then the new one into
 * place: between the two renames the target is absent, and a pack
 * killed there leaves the old dataset whole under that name.
 *
 * Ownership: struct outdir is the caller's (on its stack is fine); the
 * functions keep nothing else.
 */
#ifndef LD_OUTDIR_H
#define LD_OUTDIR_H

#include <limits.h>
#include <stdbool.h>

#include "diag.h"

struct outdir {
	char target[PATH_MAX]; /* the dataset directory (symbolic links
				* resolved) */
	char tmp[PATH_MAX];    /* the temporary directory; "" when none */
	char made[PATH_MAX];   /* the top-most parent begin made; "" none */
	int lockfd;	       /* tmp, open and locked; -1 when none */
	bool force;
	/* What outdir_begin() swept and outdir_commit() left, or "". */
	char note[DIAG_MAX];
};

/*
 * Check target and make the temporary directory. Fails with -EEXIST
 * (without force) when target holds a dataset (a manifest.json or a
 * shard-*.lds file), -ENOTDIR when it is not a directory, -EISDIR when
 * it holds a directory of its own; with -errno when the parent cannot
 * be made or written. On failure nothing is left made. o->note may name
 * temporaries of killed packs that were removed.
 */
int outdir_begin(struct outdir *o, const char *target, bool force,
		 struct diag *d);

/*
 * Swap the dataset in o->tmp into o->target, as above. Returns 0, or
 * -errno with d naming what failed (then o->tmp is still there, for
 * outdir_abort()). After a successful commit, o->note says what could
 * not be removed of the old directory, if anything.
 */
int outdir_commit(struct outdir *o, struct diag *d);

/*
 * Remove o->tmp (the files a pack writes in it, then the directory) and
 * the parents outdir_begin() made, if they are empty. Safe to call after
 * a commit (then it does nothing) and on a zeroed or failed o.
 */
void outdir_abort(struct outdir *o);

#endif /* LD_OUTDIR_H */
