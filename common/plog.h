/*
 * plog.h - leveled log lines on stderr, for the daemon and its pipeline.
 *
 * One line per call, written with a single write(2) so that lines from
 * different threads never interleave. The message's control characters
 * and backslashes are escaped (escape.h): clients' text in it cannot
 * start a line, or a priority, of its own. journald (or a terminal) adds what
 * else is needed.
 */
#ifndef LD_PLOG_H
#define LD_PLOG_H

enum plog_level {
	PLOG_ERR = 3,
	PLOG_WARN = 4,
	PLOG_INFO = 6,
	PLOG_DEBUG = 7,
};

/*
 * From now on, lines go to syslog(3) (facility daemon, tagged ident and
 * the pid, at their level) instead of stderr: for a daemon that detached
 * from its terminal, whose stderr leads nowhere.
 */
void plog_to_syslog(const char *ident);

/* Lines above this level are dropped (default PLOG_INFO). */
void plog_set_level(int level);

/* Parse "err", "warn", "info" or "debug"; returns -1 if unknown. */
int plog_parse_level(const char *name);

void plog(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* LD_PLOG_H */
