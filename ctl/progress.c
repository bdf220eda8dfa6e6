/*
 * progress.c - a terminal progress bar.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "progress.h"

double progress_now(void)
{
	return clock_mono_s();
}

const char *progress_bytes(double bytes, char *buf, unsigned n)
{
	static const char *const units[] = { "B", "kB", "MB", "GB", "TB" };
	unsigned u = 0;

	while (bytes >= 1000 && u < 4) {
		bytes /= 1000;
		u++;
	}
	snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
	return buf;
}

void progress_start(struct progress *p, const char *label, const char *unit,
		    uint64_t total)
{
	memset(p, 0, sizeof(*p));
	p->label = label;
	p->unit = unit;
	p->total = total;
	p->on = isatty(STDERR_FILENO);
	p->start = p->last = progress_now();
}

static void draw(struct progress *p, double now)
{
	char a[32], b[32];
	double el = now - p->start, rate = el > 0 ? (double)p->done / el : 0;
	int width = 30, fill = 0;
	char bar[31];

	if (p->total)
		fill = (int)((double)width * (double)p->done /
			     (double)p->total);
	if (fill > width)
		fill = width;
	memset(bar, '#', (size_t)fill);
	memset(bar + fill, '.', (size_t)(width - fill));
	bar[width] = '\0';
	if (!strcmp(p->unit, "B"))
		fprintf(stderr, "\r%s [%s] %s / %s  %s/s ", p->label, bar,
			progress_bytes((double)p->done, a, sizeof(a)),
			progress_bytes((double)p->total, b, sizeof(b)),
			progress_bytes(rate, a, sizeof(a)));
	else
		fprintf(stderr, "\r%s [%s] %" PRIu64 "/%" PRIu64 " %s  %.0f/s ",
			p->label, bar, p->done, p->total, p->unit, rate);
	fflush(stderr);
}

void progress_add(struct progress *p, uint64_t n)
{
	double now;

	p->done += n;
	if (!p->on)
		return;
	now = progress_now();
	if (now - p->last < 0.1)
		return;
	p->last = now;
	draw(p, now);
}

void progress_end(struct progress *p)
{
	if (p->on)
		fprintf(stderr, "\r\033[K");
}
