/*
 * fuzz_ispec.c - the image pipeline spec ("decode | rrc 224 | ..."):
 * parsed, and what parses formatted and parsed again to the same text;
 * a spec with schedules parses at every epoch (ispec_parse() checked
 * them all).
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ispec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1), a[ISPEC_TEXT_MAX], b[ISPEC_TEXT_MAX];
	struct ispec sp, again;
	struct diag d;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (!ispec_parse(&sp, text, &d) &&
	    ispec_format(&sp, a, sizeof(a)) >= 0) {
		if (ispec_parse(&again, a, &d) ||
		    ispec_format(&again, b, sizeof(b)) < 0 || strcmp(a, b))
			abort(); /* a spec's text must read back as itself */
		for (uint32_t e = 0; sp.sched && e < 4; e++)
			if (ispec_parse_epoch(&again, text,
					      e * (sp.sched_end / 2 + 1), &d))
				abort(); /* every epoch was checked */
	}
	free(text);
	return 0;
}
