/*
 * loaderd.c - the data-loading daemon: options, signals, the main loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <uv.h>

#include "loader_error.h"
#include "opts.h"
#include "plog.h"
#include "pool.h"
#include "server.h"

struct loaderd_opts {
	const char *socket;
	bool foreground;
	uint64_t threads;
	const char *log_level;
	uint64_t max_ring;
	uint64_t max_uid_ring;
	uint64_t max_uid_streams;
	uint64_t max_uid_files;
	uint64_t max_pixels;
};

#define O(f) offsetof(struct loaderd_opts, f)
static const struct opt loaderd_table[] = {
	{ "socket", 's', OPT_STR, O(socket), NULL, "PATH",
	  "control socket (default: $XDG_RUNTIME_DIR/loaderd.sock, or /run/loaderd/loaderd.sock as root)",
	  0, 0 },
	{ "foreground", 'f', OPT_FLAG, O(foreground), NULL, NULL,
	  "stay in the foreground (as under systemd); otherwise detach once listening",
	  0, 0 },
	{ "threads", 't', OPT_U64, O(threads), "0", "N",
	  "decode threads shared by all streams (0: one per core, less one)", 0,
	  0 },
	{ "log-level", 'l', OPT_STR, O(log_level), "info", "LEVEL",
	  "err, warn, info or debug", 0, 0 },
	{ "max-ring", 0, OPT_SIZE, O(max_ring), "1G", "BYTES",
	  "largest batch ring of one stream", 0, 0 },
	{ "max-uid-ring", 0, OPT_SIZE, O(max_uid_ring), "4G", "BYTES",
	  "ring bytes all streams of one user may hold", 0, 0 },
	{ "max-uid-streams", 0, OPT_U64, O(max_uid_streams), "64", "N",
	  "streams one user may hold", 0, 0 },
	{ "max-uid-files", 0, OPT_U64, O(max_uid_files), "0", "N",
	  "dataset descriptors one user's sessions may hold (0: a quarter of the descriptor limit)",
	  0, 0 },
	{ "max-pixels", 0, OPT_SIZE, O(max_pixels), "64M", "N",
	  "largest image (width x height) the image pipeline decodes; larger ones are bad samples",
	  0, 0 },
	OPT_END,
};
#undef O

/* What the loop runs; the signal handles' data. */
struct loaderd {
	struct server *srv;
	uv_signal_t sigint, sigterm;
};

/* Close sig if uv_signal_init() set it up (it sets loop) and it is open. */
static void close_signal(uv_signal_t *sig)
{
	if (sig->loop && !uv_is_closing((uv_handle_t *)sig))
		uv_close((uv_handle_t *)sig, NULL);
}

/*
 * Stop: close everything the loop watches, and let uv_run() return by
 * itself once the last handle has closed and the last job on the thread
 * pool (a stream being opened or freed) has finished. uv_stop() would
 * return before those, with the server's memory still in use.
 */
static void on_signal(uv_signal_t *sig, int signum)
{
	struct loaderd *ld = sig->data;

	plog(PLOG_INFO, "signal %d: stopping", signum);
	server_free(ld->srv);
	ld->srv = NULL;
	close_signal(&ld->sigint);
	close_signal(&ld->sigterm);
}

/* Watch signum with sig. Returns 0 or a libuv error (a negative errno). */
static int watch_signal(uv_loop_t *loop, uv_signal_t *sig, int signum,
			struct loaderd *ld)
{
	/* uv_signal_init() fails only where the loop's signal pipe does. */
	int err = uv_signal_init(loop, sig);

	if (err)
		return err;
	sig->data = ld;
	err = uv_signal_start(sig, on_signal, signum);
	if (err)
		uv_close((uv_handle_t *)sig, NULL);
	return err;
}

static void default_socket(char *buf, size_t n)
{
	const char *rt = getenv("XDG_RUNTIME_DIR");

	if (getuid() != 0 && rt && *rt) {
		snprintf(buf, n, "%s/loaderd.sock", rt);
		return;
	}
	mkdir("/run/loaderd", 0755);
	snprintf(buf, n, "/run/loaderd/loaderd.sock");
}

/*
 * Detach: the parent waits until the child listens (or fails), so that
 * "loaderd && client" never races the socket.
 */
static int detach(int *notify)
{
	int p[2];
	pid_t pid;
	char c;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(1);
		_exit(c == 'k' ? 0 : 1);
	}
	close(p[0]);
	setsid();
	*notify = p[1];
	return 0;
}

static void notify_parent(int fd, bool ok)
{
	char c = ok ? 'k' : 'x';
	int null;

	if (fd < 0)
		return;
	if (ok) {
		null = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, STDIN_FILENO);
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
			close(null);
		}
	}
	if (write(fd, &c, 1) < 0)
		return;
	close(fd);
}

int main(int argc, char **argv)
{
	static const char usage[] = "loaderd [OPTIONS]";
	struct loaderd_opts o = { 0 };
	struct server_limits lim;
	struct diag d = { { 0 } };
	struct pool *pool = NULL;
	struct loaderd ld = { 0 };
	uv_loop_t *loop;
	char path[108];
	int nargs, help, err, level, notify = -1, rc = 0;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t threads;
	struct rlimit nofile;

	err = opts_parse(loaderd_table, &o, argc, argv, &nargs, &help, &d);
	if (err || help || nargs > 1) {
		if (help) {
			opts_help(
				stdout, usage,
				"Serve batches of sharded datasets to training processes\n"
				"through shared memory; see loaderd(8).",
				loaderd_table);
			return 0;
		}
		fprintf(stderr, "loaderd: %s\nusage: %s (--help for options)\n",
			err ? d.msg : "unexpected argument", usage);
		return 2;
	}
	level = plog_parse_level(o.log_level);
	if (level < 0) {
		fprintf(stderr,
			"loaderd: --log-level: \"%s\" is not err, warn, info or debug\n",
			o.log_level);
		return 2;
	}
	plog_set_level(level);
	if (o.socket)
		snprintf(path, sizeof(path), "%s", o.socket);
	else
		default_socket(path, sizeof(path));
	threads = o.threads ? (uint32_t)o.threads :
			      (uint32_t)(cores > 1 ? cores - 1 : 1);
	if (o.threads > 1024) {
		fprintf(stderr, "loaderd: --threads: at most 1024\n");
		return 2;
	}
	/* Shards are descriptors: take all the process may have. */
	if (!getrlimit(RLIMIT_NOFILE, &nofile) &&
	    nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	getrlimit(RLIMIT_NOFILE, &nofile);
	if (!o.max_uid_files)
		o.max_uid_files = nofile.rlim_cur / 4;
	lim = (struct server_limits){
		.max_ring_bytes = o.max_ring,
		.max_uid_bytes = o.max_uid_ring,
		.max_uid_streams = (uint32_t)o.max_uid_streams,
		.max_uid_files = o.max_uid_files,
		.max_pixels = o.max_pixels,
	};
	if (!o.foreground && detach(&notify)) {
		fprintf(stderr, "loaderd: cannot detach: %s\n",
			strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	err = pool_new(&pool, threads);
	if (err) {
		plog(PLOG_ERR, "cannot start %" PRIu32 " threads: %s", threads,
		     loader_strerror(err));
		notify_parent(notify, false);
		return 1;
	}
	loop = uv_default_loop();
	if (!loop) {
		plog(PLOG_ERR, "cannot start the event loop");
		notify_parent(notify, false);
		pool_free(pool);
		return 1;
	}
	/*
	 * Signals first: once the socket exists, whoever sees it may stop
	 * the daemon, and a SIGTERM must then find its handler in place.
	 */
	err = watch_signal(loop, &ld.sigint, SIGINT, &ld);
	if (!err)
		err = watch_signal(loop, &ld.sigterm, SIGTERM, &ld);
	if (err)
		snprintf(d.msg, sizeof(d.msg), "signals: %s", uv_strerror(err));
	else
		err = server_new(&ld.srv, loop, path, pool, &lim, &d);
	if (err) {
		plog(PLOG_ERR, "%s", d.msg);
		notify_parent(notify, false);
		server_free(ld.srv);
		close_signal(&ld.sigint);
		close_signal(&ld.sigterm);
		rc = 1;
	} else {
		plog(PLOG_INFO,
		     "listening on %s with %" PRIu32 " decode threads (pid %d)",
		     path, threads, (int)getpid());
		notify_parent(notify, true);
	}
	/*
	 * Runs until on_signal() has closed everything (or, after a failed
	 * start, until what was set up has closed). It returns non-zero only
	 * after uv_stop(), which nothing calls.
	 */
	(void)uv_run(loop, UV_RUN_DEFAULT);
	err = uv_loop_close(loop);
	if (err)
		plog(PLOG_WARN, "event loop: %s", uv_strerror(err));
	pool_free(pool);
	if (!rc)
		plog(PLOG_INFO, "stopped");
	return rc;
}
