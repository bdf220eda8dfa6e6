/*
 * abisizes.c - the layout of libloader's public structs, as the C
 * compiler lays them out: "STRUCT size N" and "STRUCT.FIELD OFFSET" lines.
 *
 * The Python package describes the same structs to ctypes; its test
 * compares the two, so that a field added on one side only cannot go
 * unnoticed.
 */
#include <stddef.h>
#include <stdio.h>

#include "loader.h"

#define SIZE(s)	    printf("%s size %zu\n", #s, sizeof(struct s))
#define FIELD(s, f) printf("%s.%s %zu\n", #s, #f, offsetof(struct s, f))

int main(void)
{
	SIZE(loader_opts);
	FIELD(loader_opts, size);
	FIELD(loader_opts, socket_path);
	FIELD(loader_opts, outputs);
	FIELD(loader_opts, pipeline);
	FIELD(loader_opts, on_bad);
	FIELD(loader_opts, batch_size);
	FIELD(loader_opts, order);
	FIELD(loader_opts, seed);
	FIELD(loader_opts, epochs);
	FIELD(loader_opts, start_epoch);
	FIELD(loader_opts, rank);
	FIELD(loader_opts, world);
	FIELD(loader_opts, drop_last);
	FIELD(loader_opts, ring_slots);
	FIELD(loader_opts, prefetch_bytes);
	FIELD(loader_opts, threads);
	FIELD(loader_opts, direct);
	FIELD(loader_opts, timeout_ms);
	FIELD(loader_opts, start_batch);
	FIELD(loader_opts, name);
	FIELD(loader_opts, fresh);
	FIELD(loader_opts, reconnect_ms);
	FIELD(loader_opts, ragged_bytes);
	FIELD(loader_opts, from_world);
	FIELD(loader_opts, from_plan_end);
	FIELD(loader_opts, from_epoch);
	FIELD(loader_opts, from_batch);
	FIELD(loader_opts, from_plan);
	FIELD(loader_opts, pad);
	FIELD(loader_opts, members);
	FIELD(loader_opts, nmembers);
	FIELD(loader_opts, member_size);
	FIELD(loader_opts, epoch_size);
	SIZE(loader_member);
	FIELD(loader_member, dataset);
	FIELD(loader_member, how);
	FIELD(loader_member, reserved);
	FIELD(loader_member, value);
	FIELD(loader_member, pipeline);
	SIZE(loader_tensor);
	FIELD(loader_tensor, name);
	FIELD(loader_tensor, data);
	FIELD(loader_tensor, dtype);
	FIELD(loader_tensor, ndim);
	FIELD(loader_tensor, shape);
	FIELD(loader_tensor, bytes);
	SIZE(loader_batch);
	FIELD(loader_batch, seq);
	FIELD(loader_batch, index);
	FIELD(loader_batch, epoch);
	FIELD(loader_batch, count);
	FIELD(loader_batch, ids);
	FIELD(loader_batch, noutputs);
	FIELD(loader_batch, out);
	SIZE(loader_stats);
	FIELD(loader_stats, size);
	FIELD(loader_stats, reserved);
	FIELD(loader_stats, batches);
	FIELD(loader_stats, samples);
	FIELD(loader_stats, bytes);
	FIELD(loader_stats, wait_ns);
	FIELD(loader_stats, batches_per_epoch);
	FIELD(loader_stats, dataset_samples);
	FIELD(loader_stats, daemon_bytes_read);
	FIELD(loader_stats, daemon_bad_samples);
	FIELD(loader_stats, daemon_rss);
	FIELD(loader_stats, daemon_cache_hits);
	FIELD(loader_stats, daemon_cache_misses);
	printf("LOADER_VERSION %d\n", LOADER_VERSION);
	return 0;
}
