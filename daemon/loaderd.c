/*
 * loaderd.c - the data-loading daemon: options, signals, the main loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grp.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <jansson.h>
#include <systemd/sd-daemon.h>
#include <uv.h>

#include "cores.h"
#include "fault.h"
#include "loader_error.h"
#include "opts.h"
#include "plog.h"
#include "pool.h"
#include "s3cache.h"
#include "s3.h"
#include "server.h"
#include "state.h"

struct loaderd_opts {
	const char *config;
	bool print_config;
	bool version;
	const char *socket;
	uint64_t socket_mode;
	const char *socket_group;
	bool foreground;
	uint64_t threads;
	const char *log_level;
	uint64_t max_ring;
	uint64_t max_uid_ring;
	uint64_t max_uid_streams;
	uint64_t max_uid_files;
	uint64_t max_sessions, max_uid_sessions;
	uint64_t max_uid_memory;
	uint64_t max_pixels;
	bool direct;
	uint64_t io_depth;
	double stop_timeout;
	uint64_t memory_budget;
	uint64_t cache_memory;
	uint64_t cache_disk;
	const char *state_dir;
	const char *cache_dir;
	uint64_t stream_expiry;
	uint64_t max_uid_names;
	uint64_t max_uid_state;
	uint64_t max_uid_stages;
	uint64_t s3_stage_timeout;
	const char *s3_endpoints;
};

/*
 * Every option, once: the command line, the config file (all but the
 * OPT_F_CLI_ONLY ones), --help, --print-config and the man pages'
 * lists (tests/integration/daemon_config.sh checks those agree) come
 * from this table.
 */
#define O(f) offsetof(struct loaderd_opts, f)
static const struct opt loaderd_table[] = {
	{ "config", 'c', OPT_STR, O(config), NULL, "FILE",
	  "read options from FILE (default: " LOADERD_CONF
	  " if it exists); the command line wins over it",
	  0, 0, OPT_F_CLI_ONLY },
	{ "print-config", 0, OPT_FLAG, O(print_config), NULL, NULL,
	  "print the options in effect as a config file, and exit", 0, 0,
	  OPT_F_CLI_ONLY },
	{ "version", 0, OPT_FLAG, O(version), NULL, NULL,
	  "print loaderd's version, and exit", 0, 0, OPT_F_CLI_ONLY },
	{ "socket", 's', OPT_STR, O(socket), NULL, "PATH",
	  "control socket (default: $XDG_RUNTIME_DIR/loaderd.sock, or /run/loaderd/loaderd.sock as root); one passed by systemd (socket activation) wins",
	  0, 0, 0 },
	{ "socket-mode", 0, OPT_MODE, O(socket_mode), "0660", "MODE",
	  "permissions of the socket file loaderd makes (octal): who may connect",
	  0, 0, 0 },
	{ "socket-group", 0, OPT_STR, O(socket_group), NULL, "GROUP",
	  "group of the socket file loaderd makes (default: loaderd's own)", 0,
	  0, 0 },
	{ "state-dir", 0, OPT_STR, O(state_dir), NULL, "DIR",
	  "persistent state (default: $STATE_DIRECTORY from systemd, /var/lib/loaderd as root, else $XDG_STATE_HOME/loaderd); made if missing",
	  0, 0, 0 },
	{ "stream-expiry", 0, OPT_U64, O(stream_expiry), "168", "HOURS",
	  "forget a named stream's saved position after HOURS without a checkpoint (0: never)",
	  0, 0, OPT_F_RELOAD },
	{ "max-uid-names", 0, OPT_U64, O(max_uid_names), "1024", "N",
	  "named streams one user may keep in the state", 1, 1e6,
	  OPT_F_RELOAD },
	{ "max-uid-state", 0, OPT_SIZE, O(max_uid_state), "64M", "BYTES",
	  "bytes one user's named streams and tar indexes may take in the state (at most 256M: a sixteenth of the state file, so that one user cannot fill it)",
	  4096, 256 << 20, OPT_F_RELOAD },
	{ "cache-dir", 0, OPT_STR, O(cache_dir), NULL, "DIR",
	  "caches that may be lost (default: $CACHE_DIRECTORY from systemd, /var/cache/loaderd as root, else $XDG_CACHE_HOME/loaderd); made if missing",
	  0, 0, 0 },
	{ "foreground", 'f', OPT_FLAG, O(foreground), NULL, NULL,
	  "stay in the foreground (as under systemd); otherwise detach once listening",
	  0, 0, OPT_F_CLI_ONLY },
	{ "threads", 't', OPT_U64, O(threads), "0", "N",
	  "decode threads shared by all streams (0: one per core it may run on, less one)",
	  0, 1024, 0 },
	{ "log-level", 'l', OPT_CHOICE, O(log_level), "info",
	  "err|warn|info|debug",
	  "what to log: errors only, up to warnings, up to events, or everything",
	  0, 0, OPT_F_RELOAD },
	{ "max-ring", 0, OPT_SIZE, O(max_ring), "1G", "BYTES",
	  "largest batch ring of one stream", 0, 0, OPT_F_RELOAD },
	{ "max-uid-ring", 0, OPT_SIZE, O(max_uid_ring), "4G", "BYTES",
	  "ring bytes all streams of one user may hold", 0, 0, OPT_F_RELOAD },
	{ "max-uid-streams", 0, OPT_U64, O(max_uid_streams), "64", "N",
	  "streams one user may hold (0: as many as its sessions)", 0, 0,
	  OPT_F_RELOAD },
	{ "max-uid-files", 0, OPT_U64, O(max_uid_files), "0", "N",
	  "dataset descriptors one user's sessions may hold (0: a quarter of the descriptor limit)",
	  0, 0, OPT_F_RELOAD },
	{ "max-sessions", 0, OPT_U64, O(max_sessions), "0", "N",
	  "connections at once, all users together (0: a quarter of the descriptor limit)",
	  0, 0, OPT_F_RELOAD },
	{ "max-uid-sessions", 0, OPT_U64, O(max_uid_sessions), "128", "N",
	  "connections one user may hold at once (0: as many as all users together)",
	  0, 0, OPT_F_RELOAD },
	{ "max-pixels", 0, OPT_SIZE, O(max_pixels), "64M", "N",
	  "largest image (width x height) the image pipeline decodes; larger ones are bad samples",
	  0, 0, OPT_F_RELOAD },
	{ "max-uid-memory", 0, OPT_SIZE, O(max_uid_memory), "0", "BYTES",
	  "rings, prefetch and decode scratch all streams of one user may hold (0: half the machine's memory)",
	  0, 0, OPT_F_RELOAD },
	{ "memory-budget", 0, OPT_SIZE, O(memory_budget), "0", "BYTES",
	  "all streams' rings, prefetch and decode scratch together (0: no limit); a stream that would pass it is refused",
	  0, 0, OPT_F_RELOAD },
	{ "cache-memory", 0, OPT_SIZE, O(cache_memory), "0", "BYTES",
	  "the node cache: stored records shared by every stream on the same dataset files, kept as first read (0: none)",
	  0, 0, 0 },
	{ "cache-disk", 0, OPT_SIZE, O(cache_disk), "10G", "BYTES",
	  "the shard cache of s3:// datasets, in the cache directory's s3/: shards kept on disk for every stream, least recently used removed first; what has no room is read in place (0: no bound)",
	  0, 0, 0 },
	{ "max-uid-stages", 0, OPT_U64, O(max_uid_stages), "4", "N",
	  "OPENs of s3:// datasets one user may have staging at once (all users: half of libuv's thread pool); more wait their turn",
	  1, 1024, OPT_F_RELOAD },
	{ "s3-stage-timeout", 0, OPT_U64, O(s3_stage_timeout), "300", "SECONDS",
	  "an OPEN of an s3:// dataset is answered within SECONDS of its arrival, its wait for a turn, connects, stalls and retries included; past it, it is refused",
	  1, 86400, OPT_F_RELOAD },
	{ "s3-endpoints", 0, OPT_STR, O(s3_endpoints), NULL, "LIST",
	  "the object stores an s3:// OPEN may make loaderd connect to: HOST, HOST:PORT or [IPV6]:PORT patterns (wildcards as in the shell), apart by commas (default: any)",
	  0, 0, OPT_F_RELOAD },
	{ "stop-timeout", 0, OPT_F64, O(stop_timeout), "10", "SECONDS",
	  "on SIGTERM, how long streams may take to finish their batch in progress before loaderd exits anyway",
	  0.1, 3600, 0 },
	{ "direct", 0, OPT_FLAG, O(direct), NULL, NULL,
	  "read every stream's shards with O_DIRECT, whatever the client asks (datasets larger than memory)",
	  0, 0, OPT_F_RELOAD },
	{ "io-depth", 0, OPT_U64, O(io_depth), "64", "N",
	  "reads each stream keeps in flight (1 for a disk that seeks: one read at a time)",
	  1, 64, OPT_F_RELOAD },
	OPT_END,
};
#undef O

/* How often the status line (systemd's STATUS=) is brought up to date. */
#define LOADERD_STATUS_MS 5000

/* What the loop runs; the handles' data. */
struct loaderd {
	struct server *srv;
	struct state *state; /* named streams' positions; NULL: none */
	/* Where it is, and why it could not be opened ("": it was). */
	char state_dir[4096];
	struct diag state_d;
	int state_err;
	int state_fd; /* the directory's lock (state_lock()), or -1 */
	struct s3cache *s3cache; /* s3:// datasets' shards; NULL: refused */
	uv_signal_t sigint, sigterm, sighup;
	uv_timer_t status, watchdog, stop_timer;
	/* The options in effect, and what they were read from. */
	struct loaderd_opts o;
	char *conf_text; /* the config file's text: o's strings point in */
	/* Texts of earlier reloads that options kept from them point in. */
	char **kept_texts;
	size_t nkept;
	int argc;
	char **argv;
	uint64_t nofile; /* the descriptor limit, for max-uid-files 0 */
	/* The last status line's totals, for rates. */
	struct server_status last;
	uint64_t last_ms;
};

/*
 * The options: defaults, then the config file, then the command line
 * (which wins). The file is the one --config names, which must exist, or
 * the default one if it does. On error, d says what is wrong and where
 * (the file and line, or the option), and *in_file whether it is the
 * file's (no usage line for it).
 */
static int load_options(struct loaderd_opts *o, char **text, int argc,
			char **argv, int *help, bool *in_file, struct diag *d)
{
	struct loaderd_opts cli = { 0 };
	const char *path;
	int nargs, err;

	*text = NULL;
	/* A first pass over the command line: which file, and its errors. */
	err = opts_defaults(loaderd_table, &cli, d);
	if (!err)
		err = opts_parse_argv(loaderd_table, &cli, argc, argv, &nargs,
				      help, d);
	if (err || *help)
		return err;
	if (nargs)
		return diag_set(d, LOADER_EUSAGE, "unexpected argument %s",
				argv[0]);
	memset(o, 0, sizeof(*o));
	err = opts_defaults(loaderd_table, o, d);
	if (err)
		return err;
	path = cli.config;
	if (!path && access(LOADERD_CONF, F_OK) == 0)
		path = LOADERD_CONF;
	if (path && *path) {
		err = opts_parse_file(loaderd_table, o, path, text, d);
		*in_file = err != 0;
		if (err)
			return err;
	}
	return opts_parse_argv(loaderd_table, o, argc, argv, &nargs, help, d);
}

/* The values load_options() cannot check alone. */
static int check_options(const struct loaderd_opts *o, struct diag *d)
{
	int err = server_endpoints_check(o->s3_endpoints, d);

	if (err)
		return err;
	if (o->socket_group && *o->socket_group && !getgrnam(o->socket_group))
		return diag_set(d, LOADER_EUSAGE,
				"socket-group: no group \"%s\"",
				o->socket_group);
	return 0;
}

/* The machine's memory in bytes (0 if unknown). */
static uint64_t phys_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);

	return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : 0;
}

/*
 * Opens and teardowns run on libuv's thread pool (4 threads unless told),
 * and an open of an s3:// dataset holds one while it stages: a few such
 * opens must not hold up every other open and teardown. The pool's size
 * is fixed at its first use, from the environment.
 */
#define LOADERD_UV_POOL "16"

/*
 * Stages of s3:// datasets that may run at once, all users: half the
 * pool, so that local opens, teardowns, the saved-stream listing and the
 * state's expiry always find threads free.
 */
static uint32_t max_stages(void)
{
	const char *v = getenv("UV_THREADPOOL_SIZE");
	long n = v ? strtol(v, NULL, 10) : 0;

	/* libuv's own reading: 0 or less is 1, more than 1024 is 1024. */
	if (n <= 0)
		n = 1;
	if (n > 1024)
		n = 1024;
	return n > 1 ? (uint32_t)n / 2 : 1;
}

static void make_limits(const struct loaderd *ld, struct server_limits *lim)
{
	const struct loaderd_opts *o = &ld->o;
	/*
	 * 0 is never "refuse everything": each limit's 0 is the daemon's
	 * choice, a user's sessions and streams bounded by the next limit
	 * up.
	 */
	uint64_t sessions = o->max_sessions ? o->max_sessions : ld->nofile / 4;
	uint64_t uid_sessions =
		o->max_uid_sessions ? o->max_uid_sessions : sessions;

	*lim = (struct server_limits){
		.max_ring_bytes = o->max_ring,
		.max_uid_bytes = o->max_uid_ring,
		.max_uid_streams =
			(uint32_t)(o->max_uid_streams ? o->max_uid_streams :
							uid_sessions),
		.max_uid_files =
			o->max_uid_files ? o->max_uid_files : ld->nofile / 4,
		.max_sessions = (uint32_t)sessions,
		.max_uid_sessions = (uint32_t)uid_sessions,
		.max_pixels = o->max_pixels,
		.direct = o->direct,
		.io_depth = (uint32_t)o->io_depth,
		.memory_budget = o->memory_budget,
		.cache_memory = o->cache_memory,
		.max_uid_memory = o->max_uid_memory ? o->max_uid_memory :
						      phys_memory() / 2,
		.stream_expiry_ms = o->stream_expiry * 3600 * 1000,
		.max_uid_names = (uint32_t)o->max_uid_names,
		.max_uid_state = o->max_uid_state,
		.max_uid_stages = (uint32_t)o->max_uid_stages,
		.max_stages = max_stages(),
		.stage_timeout_ms = o->s3_stage_timeout * 1000,
		.s3_endpoints = o->s3_endpoints,
	};
	if (lim->max_uid_stages > lim->max_stages)
		lim->max_uid_stages = lim->max_stages;
}

/* Close h if it was set up (init sets its loop) and is not closing. */
static void close_handle(void *h)
{
	uv_handle_t *u = h;

	if (u->loop && !uv_is_closing(u))
		uv_close(u, NULL);
}

/* The drain took too long: a stream is stuck in its batch. */
static void on_stop_timeout(uv_timer_t *t)
{
	struct loaderd *ld = t->data;

	plog(PLOG_WARN,
	     "stopping: streams still finishing after %g s (stop-timeout); exiting",
	     ld->o.stop_timeout);
	_exit(0);
}

/*
 * Stop: close everything the loop watches, and let uv_run() return by
 * itself once the last handle has closed and the last job on the thread
 * pool (a stream being opened or freed) has finished. uv_stop() would
 * return before those, with the server's memory still in use.
 */
static void stop(struct loaderd *ld, int signum)
{
	plog(PLOG_INFO, "signal %d: stopping", signum);
	sd_notify(0, "STOPPING=1");
	/*
	 * Streams being freed finish their batch in progress first; bound
	 * that. The timer must not keep the loop alive once all is done.
	 */
	if (!uv_timer_init(ld->status.loop, &ld->stop_timer)) {
		ld->stop_timer.data = ld;
		if (!uv_timer_start(&ld->stop_timer, on_stop_timeout,
				    (uint64_t)(ld->o.stop_timeout * 1000), 0))
			uv_unref((uv_handle_t *)&ld->stop_timer);
	}
	server_free(ld->srv);
	ld->srv = NULL;
	close_handle(&ld->sigint);
	close_handle(&ld->sigterm);
	close_handle(&ld->sighup);
	close_handle(&ld->status);
	close_handle(&ld->watchdog);
}

/*
 * Lock the state directory and open the state, or log why not: the
 * daemon serves on without it, refusing named streams with the reason,
 * and tries again on SIGHUP. Returns -EBUSY, and logs nothing, when
 * another daemon holds the directory (fatal at start).
 */
static int open_state(struct loaderd *ld)
{
	if (ld->state_fd < 0) {
		ld->state_err =
			state_lock(ld->state_dir, &ld->state_fd, &ld->state_d);
		if (ld->state_err == -EBUSY)
			return -EBUSY;
	}
	if (ld->state_fd >= 0)
		ld->state_err =
			state_open(&ld->state, ld->state_dir, &ld->state_d);
	if (ld->state_err)
		plog(PLOG_ERR,
		     "state: %s; named streams are refused until a reload (SIGHUP) opens it",
		     ld->state_d.msg);
	return 0;
}

/*
 * SIGHUP: read the options again. What can change live (limits, log
 * level: OPT_F_RELOAD) applies to what comes next; the rest is named as
 * needing a restart. A file that does not parse changes nothing.
 */
static void reload(struct loaderd *ld)
{
	struct loaderd_opts n;
	struct server_limits lim;
	struct diag d = { { 0 } };
	char *text = NULL, later[256] = "";
	size_t used = 0;
	int help, err;
	bool in_file = false;

	sd_notify(0, "RELOADING=1");
	err = load_options(&n, &text, ld->argc, ld->argv, &help, &in_file, &d);
	if (!err)
		err = check_options(&n, &d);
	if (err) {
		plog(PLOG_ERR, "reload: %s; the options in effect stay", d.msg);
		free(text);
		sd_notify(0, "READY=1");
		return;
	}
	for (const struct opt *t = loaderd_table; t->name; t++) {
		if ((t->flags & (OPT_F_RELOAD | OPT_F_CLI_ONLY)) ||
		    opts_same(t, &ld->o, &n))
			continue;
		used += (size_t)snprintf(
			later + used,
			used < sizeof(later) ? sizeof(later) - used : 0, "%s%s",
			used ? ", " : "", t->name);
		/* Keep what runs: it changes only with a restart. */
		opts_copy(t, &n, &ld->o);
	}
	/*
	 * Strings of options kept may point into the old text: then it
	 * lives until the daemon exits (reloads that need a restart are
	 * rare, and config files small).
	 */
	if (used) {
		char **k =
			realloc(ld->kept_texts, (ld->nkept + 1) * sizeof(*k));

		plog(PLOG_WARN,
		     "reload: changed, but applied only by a restart: %s",
		     later);
		if (!k) {
			plog(PLOG_ERR,
			     "reload: out of memory; nothing changed");
			free(text);
			sd_notify(0, "READY=1");
			return;
		}
		k[ld->nkept++] = ld->conf_text;
		ld->kept_texts = k;
	} else {
		free(ld->conf_text);
	}
	ld->conf_text = text;
	ld->o = n;
	plog_set_level(plog_parse_level(n.log_level));
	make_limits(ld, &lim);
	if (ld->srv)
		server_set_limits(ld->srv, &lim);
	if (ld->srv && !ld->state) {
		if (open_state(ld))
			plog(PLOG_ERR, "state: %s", ld->state_d.msg);
		if (ld->state) {
			plog(PLOG_INFO,
			     "state: %s opened; named streams served",
			     state_path(ld->state));
			server_set_state(ld->srv, ld->state);
		} else {
			server_state_failed(ld->srv, ld->state_err,
					    ld->state_d.msg);
		}
	}
	{
		/* Every option a reload applies, with its value now. */
		char *line = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&line, &len);

		if (m) {
			opts_print_values(m, loaderd_table, &n, OPT_F_RELOAD);
			fclose(m);
		}
		plog(PLOG_INFO, "reloaded: %s", line ? line : "");
		free(line);
	}
	sd_notify(0, "READY=1");
}

static void on_signal(uv_signal_t *sig, int signum)
{
	struct loaderd *ld = sig->data;

	if (signum == SIGHUP)
		reload(ld);
	else
		stop(ld, signum);
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

/* systemd's status line: streams, and what they deliver. */
static void on_status(uv_timer_t *t)
{
	struct loaderd *ld = t->data;
	struct server_status st;
	uint64_t now = uv_now(t->loop), ms = now - ld->last_ms;
	double b = 0, mb = 0;

	if (!ld->srv)
		return;
	server_check_socket(ld->srv);
	server_status(ld->srv, &st);
	/* A stream that ended takes its counts along: no rate from that. */
	if (ms && st.batches >= ld->last.batches &&
	    st.bytes_read >= ld->last.bytes_read) {
		b = (double)(st.batches - ld->last.batches) * 1e3 / (double)ms;
		mb = (double)(st.bytes_read - ld->last.bytes_read) / 1e3 /
		     (double)ms;
	}
	sd_notifyf(0,
		   "STATUS=%" PRIu32 " streams (%" PRIu32
		   " sessions), %.0f batches/s, %.1f MB/s read",
		   st.streams, st.sessions, b, mb);
	ld->last = st;
	ld->last_ms = now;
}

/* The loop is alive: tell systemd's watchdog. */
static void on_watchdog(uv_timer_t *t)
{
	(void)t;
	sd_notify(0, "WATCHDOG=1");
}

/*
 * Timers for the status line and, when the unit sets WatchdogSec=, the
 * watchdog: pinged at half its period from the loop, so a loop that
 * stops turning gets the daemon restarted.
 */
static int start_timers(uv_loop_t *loop, struct loaderd *ld)
{
	uint64_t usec = 0;
	int err;

	(void)uv_timer_init(loop, &ld->status);
	ld->status.data = ld;
	ld->last_ms = uv_now(loop);
	err = uv_timer_start(&ld->status, on_status, LOADERD_STATUS_MS,
			     LOADERD_STATUS_MS);
	if (err)
		return err;
	uv_unref((uv_handle_t *)&ld->status);
	(void)uv_timer_init(loop, &ld->watchdog);
	ld->watchdog.data = ld;
	if (sd_watchdog_enabled(0, &usec) > 0 && usec >= 2000) {
		err = uv_timer_start(&ld->watchdog, on_watchdog, 0,
				     usec / 2000);
		if (err)
			return err;
		plog(PLOG_INFO, "systemd watchdog: a ping every %" PRIu64 " ms",
		     usec / 2000);
	}
	return 0;
}

/*
 * The socket systemd passes (socket activation): one, a listening
 * SOCK_SEQPACKET Unix socket; -1 when none was passed. Its path, for
 * the logs, goes to path.
 */
static int activated_socket(char *path, size_t n, struct diag *d)
{
	struct sockaddr_un a;
	socklen_t an = sizeof(a);
	int k = sd_listen_fds(1);

	if (k < 0)
		return diag_set(d, k, "sd_listen_fds: %s", strerror(-k));
	if (k == 0)
		return -1;
	if (k > 1)
		return diag_set(d, LOADER_EUSAGE,
				"systemd passed %d sockets; loaderd takes one",
				k);
	memset(&a, 0, sizeof(a));
	if (!getsockname(SD_LISTEN_FDS_START, (struct sockaddr *)&a, &an) &&
	    a.sun_family == AF_UNIX && a.sun_path[0])
		snprintf(path, n, "%s", a.sun_path);
	else
		snprintf(path, n, "(socket from systemd)");
	return SD_LISTEN_FDS_START;
}

/*
 * Under socket activation the socket is systemd's, made as the .socket
 * unit says: socket, socket-mode and socket-group set here change
 * nothing, and an operator who set them should hear so.
 */
static void socket_opts_unused(const struct loaderd_opts *o, const char *path)
{
	char set[64] = "";

	if (o->socket && *o->socket)
		strcat(set, ", socket");
	if (o->socket_mode != 0660)
		strcat(set, ", socket-mode");
	if (o->socket_group && *o->socket_group)
		strcat(set, ", socket-group");
	if (set[0])
		plog(PLOG_WARN,
		     "%s set, but systemd passed the socket (%s): they have no effect; set ListenSequentialPacket=, SocketMode= and SocketGroup= in loaderd.socket instead (systemctl edit loaderd.socket)",
		     set + 2, path);
}

/*
 * A directory of the daemon's: the option's value, else the one systemd
 * made for the unit (env: $STATE_DIRECTORY or $CACHE_DIRECTORY, the first
 * of a colon-separated list), else root_dir as root, else
 * $XDG_..._HOME/loaderd or ~/xdg_home/loaderd. It is made (mode 0700,
 * with missing parents) if missing, and must be a directory loaderd may
 * write in: anything else stops the daemon before it starts.
 */
static int daemon_dir(char *buf, size_t n, const char *opt, const char *value,
		      const char *env, const char *root_dir,
		      const char *xdg_env, const char *xdg_home, struct diag *d)
{
	const char *e = getenv(env), *x = getenv(xdg_env),
		   *home = getenv("HOME");
	struct stat st;
	int len;

	if (value && *value)
		len = snprintf(buf, n, "%s", value);
	else if (e && *e)
		len = snprintf(buf, n, "%.*s", (int)strcspn(e, ":"), e);
	else if (getuid() == 0)
		len = snprintf(buf, n, "%s", root_dir);
	else if (x && *x == '/')
		len = snprintf(buf, n, "%s/loaderd", x);
	else if (home && *home == '/')
		len = snprintf(buf, n, "%s/%s/loaderd", home, xdg_home);
	else
		return diag_set(d, LOADER_EUSAGE,
				"%s: no default without $HOME or $%s: give one",
				opt, xdg_env);
	if (len < 0 || (size_t)len >= n)
		return diag_set(d, LOADER_EUSAGE, "%s: path too long", opt);
	if (buf[0] != '/')
		return diag_set(d, LOADER_EUSAGE,
				"%s: %s: not an absolute path", opt, buf);
	/* Make the missing components, parents first. */
	for (char *p = buf + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(buf, 0700) && errno != EEXIST) {
			int e2 = errno;

			*p = c;
			return diag_set(d, LOADER_EUSAGE,
					"%s: cannot make %s: %s", opt, buf,
					strerror(e2));
		}
		*p = c;
		if (!c)
			break;
	}
	if (stat(buf, &st))
		return diag_set(d, LOADER_EUSAGE, "%s: %s: %s", opt, buf,
				strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return diag_set(d, LOADER_EUSAGE, "%s: %s: not a directory",
				opt, buf);
	if (access(buf, W_OK | X_OK))
		return diag_set(d, LOADER_EUSAGE, "%s: %s: %s", opt, buf,
				strerror(errno));
	return 0;
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
		/* Detached: stderr leads nowhere from here, the log to syslog. */
		plog_to_syslog("loaderd");
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

/*
 * The shard cache of s3:// datasets, in cache/s3. Without it the daemon
 * serves on and refuses s3:// datasets, saying why.
 */
static void open_s3cache(struct loaderd *ld, const char *cache)
{
	struct s3cache_params p = { .budget = ld->o.cache_disk };
	char dir[PATH_MAX + 4];
	struct diag d;

	snprintf(dir, sizeof(dir), "%s/s3", cache);
	if (s3cache_new(&ld->s3cache, dir, &p, &d))
		plog(PLOG_ERR, "shard cache: %s; s3:// datasets are refused",
		     d.msg);
}

int main(int argc, char **argv)
{
	static const char usage[] = "loaderd [OPTIONS]";
	struct server_limits lim;
	struct server_listen l;
	struct diag d = { { 0 } };
	struct pool *pool = NULL;
	struct loaderd ld = { .state_fd = -1 };
	uv_loop_t *loop;
	char path[108], state[PATH_MAX], cache[PATH_MAX];
	int help, err, notify = -1, rc = 0, fd;
	uint32_t cores = cores_usable();
	uint32_t threads;
	bool curl_ok, in_file = false;
	struct group *gr;
	struct rlimit nofile;

	err = load_options(&ld.o, &ld.conf_text, argc, argv, &help, &in_file,
			   &d);
	if (!err && !help)
		err = check_options(&ld.o, &d);
	if (err || help) {
		if (help) {
			opts_help(
				stdout, usage,
				"Serve batches of sharded datasets to training processes\n"
				"through shared memory; see loaderd(8) and loaderd.conf(5).",
				loaderd_table);
			return 0;
		}
		/* With its priority, so that journalctl -p err shows why. */
		plog(PLOG_ERR, "loaderd: %s", d.msg);
		if (!in_file)
			fprintf(stderr, "usage: %s (--help for options)\n",
				usage);
		return 2;
	}
	if (ld.o.version) {
		printf("loaderd %s\n", PACKAGE_VERSION);
		free(ld.conf_text);
		return 0;
	}
	if (ld.o.print_config) {
		printf("# loaderd.conf: the options in effect (loaderd --print-config)\n");
		opts_print_config(stdout, loaderd_table, &ld.o);
		free(ld.conf_text);
		return 0;
	}
	err = daemon_dir(state, sizeof(state), "state-dir", ld.o.state_dir,
			 "STATE_DIRECTORY", "/var/lib/loaderd",
			 "XDG_STATE_HOME", ".local/state", &d);
	if (!err)
		err = daemon_dir(cache, sizeof(cache), "cache-dir",
				 ld.o.cache_dir, "CACHE_DIRECTORY",
				 "/var/cache/loaderd", "XDG_CACHE_HOME",
				 ".cache", &d);
	if (err) {
		plog(PLOG_ERR, "loaderd: %s", d.msg);
		free(ld.conf_text);
		return 1;
	}
	ld.argc = argc;
	ld.argv = argv;
	plog_set_level(plog_parse_level(ld.o.log_level));
	/* Faults for the tests (fault.h): never set in a real deployment. */
	err = fault_setup(getenv("LOADERD_FAULT"), &d);
	if (err) {
		plog(PLOG_ERR, "loaderd: LOADERD_FAULT: %s", d.msg);
		return 2;
	}
	if (fault_armed) {
		plog(PLOG_WARN, "faults injected on purpose: LOADERD_FAULT=%s",
		     getenv("LOADERD_FAULT"));
		/* The manifest's JSON is allocated at open too. */
		json_set_alloc_funcs(mem_alloc, free);
	}
	fd = activated_socket(path, sizeof(path), &d);
	if (fd < -1) {
		plog(PLOG_ERR, "loaderd: %s", d.msg);
		return 1;
	}
	if (fd >= 0)
		socket_opts_unused(&ld.o, path);
	if (fd < 0) {
		if (ld.o.socket && *ld.o.socket)
			snprintf(path, sizeof(path), "%s", ld.o.socket);
		else
			default_socket(path, sizeof(path));
	}
	gr = ld.o.socket_group && *ld.o.socket_group ?
		     getgrnam(ld.o.socket_group) :
		     NULL;
	l = (struct server_listen){
		.path = path,
		.fd = fd,
		.mode = (unsigned)ld.o.socket_mode,
		.gid = gr ? (long)gr->gr_gid : -1,
	};
	threads = (uint32_t)ld.o.threads;
	if (!threads)
		threads = cores > 1 ? cores - 1 : 1;
	/* Shards are descriptors: take all the process may have. */
	if (!getrlimit(RLIMIT_NOFILE, &nofile) &&
	    nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	getrlimit(RLIMIT_NOFILE, &nofile);
	ld.nofile = nofile.rlim_cur;
	setenv("UV_THREADPOOL_SIZE", LOADERD_UV_POOL, 0);
	make_limits(&ld, &lim);
	if (!ld.o.foreground && detach(&notify)) {
		plog(PLOG_ERR, "loaderd: cannot detach: %s", strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	/* libcurl's global state, before any thread. */
	curl_ok = !s3_global_init();
	if (!curl_ok)
		plog(PLOG_ERR,
		     "libcurl: cannot initialise; s3:// datasets are refused");
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
	if (!err)
		err = watch_signal(loop, &ld.sighup, SIGHUP, &ld);
	if (!err)
		err = start_timers(loop, &ld);
	if (err) {
		snprintf(d.msg, sizeof(d.msg), "signals and timers: %s",
			 uv_strerror(err));
	} else {
		/*
		 * The state before the socket: whoever sees the socket may
		 * ask for a named stream at once. After detaching: an LMDB
		 * environment must not cross a fork. Without it the daemon
		 * serves on and refuses named streams, saying why.
		 */
		snprintf(ld.state_dir, sizeof(ld.state_dir), "%s", state);
		err = open_state(&ld);
		if (err) {
			d = ld.state_d;
		} else {
			if (curl_ok)
				open_s3cache(&ld, cache);
			err = server_new(&ld.srv, loop, &l, pool, &lim, &d);
		}
	}
	if (err) {
		plog(PLOG_ERR, "%s", d.msg);
		notify_parent(notify, false);
		server_free(ld.srv);
		ld.srv = NULL;
		close_handle(&ld.sigint);
		close_handle(&ld.sigterm);
		close_handle(&ld.sighup);
		close_handle(&ld.status);
		close_handle(&ld.watchdog);
		rc = 1;
	} else {
		server_set_dirs(ld.srv, state, cache);
		server_set_state(ld.srv, ld.state);
		if (!ld.state)
			server_state_failed(ld.srv, ld.state_err,
					    ld.state_d.msg);
		server_set_remote(ld.srv, ld.s3cache);
		plog(PLOG_INFO,
		     "listening on %s%s with %" PRIu32
		     " decode threads (pid %d); state in %s, cache in %s",
		     path, fd >= 0 ? " (from systemd)" : "", threads,
		     (int)getpid(), state, cache);
		notify_parent(notify, true);
		sd_notifyf(0,
			   "READY=1\nSTATUS=listening on %s, %" PRIu32
			   " decode threads\nMAINPID=%lu",
			   path, threads, (unsigned long)getpid());
	}
	/*
	 * Runs until stop() has closed everything (or, after a failed
	 * start, until what was set up has closed). It returns non-zero only
	 * after uv_stop(), which nothing calls.
	 */
	(void)uv_run(loop, UV_RUN_DEFAULT);
	/* The stop timer (unreferenced) is all that may be left: close it. */
	close_handle(&ld.stop_timer);
	(void)uv_run(loop, UV_RUN_DEFAULT);
	err = uv_loop_close(loop);
	if (err)
		plog(PLOG_WARN, "event loop: %s", uv_strerror(err));
	pool_free(pool);
	state_close(ld.state);
	if (ld.state_fd >= 0)
		close(ld.state_fd);
	s3cache_free(ld.s3cache);
	free(ld.conf_text);
	for (size_t i = 0; i < ld.nkept; i++)
		free(ld.kept_texts[i]);
	free(ld.kept_texts);
	if (!rc)
		plog(PLOG_INFO, "stopped");
	return rc;
}
