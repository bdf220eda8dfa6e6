/*
 * fuzz_mixfile.c - a mixture file as loader_open() reads one
 * (client/mixfile.h: jansson, then every key's type and range), and the
 * members it yields built into MEMBER messages as libloader builds them
 * (loader_make_members(): the values' ranges, the pipelines' lengths).
 * Every member a file yields has a dataset and a known how; relative
 * paths are joined to a directory, so that their copies are exercised.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "loader.h"
#include "mixfile.h"
#include "openmsg.h"
#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct proto_member pm[PROTO_MAX_MEMBERS];
	struct loader_opts o = LOADER_OPTS_INIT;
	struct loader_mixfile mf;
	char why[256];

	if (loader_mixfile_parse(&mf, (const char *)data, size, "mix.json",
				 "base", why, sizeof(why)))
		return 0;
	if (!mf.nmembers || mf.nmembers > LOADER_MAX_MEMBERS)
		abort();
	for (uint32_t i = 0; i < mf.nmembers; i++)
		if (!mf.m[i].dataset || !mf.m[i].dataset[0] ||
		    mf.m[i].how > LOADER_MIX_CHOOSE || !(mf.m[i].value > 0))
			abort();
	o.members = mf.m;
	o.nmembers = mf.nmembers;
	o.epoch_size = mf.epoch_size;
	if (!loader_make_members(&o, pm, why, sizeof(why)))
		for (uint32_t i = 0; i < mf.nmembers; i++)
			if (pm[i].index != i ||
			    !memchr(pm[i].label, '\0', sizeof(pm[i].label)))
				abort();
	loader_mixfile_free(&mf);
	return 0;
}
