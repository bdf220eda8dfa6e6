/*
 * cores.h - how many cores this process may run on, for the layers that
 * size a thread pool by them.
 *
 * The affinity mask, not the cores online: under taskset or systemd's
 * CPUAffinity= a process allowed 12 of 16 cores should start threads for
 * 12. sched_getaffinity() is one system call, made once at start.
 */
#ifndef LD_CORES_H
#define LD_CORES_H

#include <sched.h>
#include <stdint.h>
#include <unistd.h>

/* Cores in the calling thread's affinity mask; the cores online if the
 * mask cannot be read (or holds more than CPU_SETSIZE); at least 1. */
static inline uint32_t cores_usable(void)
{
	cpu_set_t set;
	long n;

	if (!sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 0)
		return (uint32_t)CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (uint32_t)n : 1;
}

#endif
