/*
 * plog.c - log lines.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdbool.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "escape.h"
#include "plog.h"

static int plog_level = PLOG_INFO;
static bool plog_syslog;

void plog_to_syslog(const char *ident)
{
	openlog(ident, LOG_PID | LOG_NDELAY, LOG_DAEMON);
	plog_syslog = true;
}

void plog_set_level(int level)
{
	plog_level = level;
}

int plog_parse_level(const char *name)
{
	static const struct {
		const char *name;
		int level;
	} t[] = { { "err", PLOG_ERR },
		  { "warn", PLOG_WARN },
		  { "info", PLOG_INFO },
		  { "debug", PLOG_DEBUG } };

	for (unsigned i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(name, t[i].name))
			return t[i].level;
	return -1;
}

void plog(int level, const char *fmt, ...)
{
	static const char *const tag[8] = { "",	       "", "",	   "error",
					    "warning", "", "info", "debug" };
	char line[1024], msg[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	size_t len;
	int n, m;

	if (level > plog_level)
		return;
	va_start(ap, fmt);
	m = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m < 0)
		return;
	len = (size_t)m < sizeof(msg) ? (size_t)m : sizeof(msg) - 1;
	/*
	 * The message carries clients' text (names, paths, reasons): one
	 * line, whatever is in it (escape.h).
	 */
	if (plog_syslog) {
		esc_text(line, sizeof(line), msg, len);
		syslog(level, "%s", line);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	/* "<N>" lets journald see the priority; terminals show it too. */
	n = snprintf(line, sizeof(line), "<%d>%02d:%02d:%02d.%03ld %s: ", level,
		     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
		     tag[level & 7]);
	n += (int)esc_text(line + n, sizeof(line) - (size_t)n - 1, msg, len);
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
