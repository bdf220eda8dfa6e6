/*
 * fuzz_config.c - the configuration file reader (opts_parse_file), over
 * a table with every kind of option the daemon's has.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "fuzz.h"
#include "opts.h"

struct conf {
	bool flag;
	const char *str, *choice;
	uint64_t u64, size, mode;
	int64_t i64;
	double f64;
};

#define O(f) offsetof(struct conf, f)
static const struct opt table[] = {
	{ "flag", 0, OPT_FLAG, O(flag), NULL, NULL, "a flag", 0, 0, 0 },
	{ "str", 0, OPT_STR, O(str), "x", "S", "a string", 0, 0, 0 },
	{ "choice", 0, OPT_CHOICE, O(choice), "a", "a|b|c", "a choice", 0, 0,
	  0 },
	{ "u64", 0, OPT_U64, O(u64), "1", "N", "a number", 0, 0, 0 },
	{ "range", 0, OPT_U64, O(u64), NULL, "N", "a bounded number", 1, 9,
	  0 },
	{ "size", 0, OPT_SIZE, O(size), "1M", "BYTES", "a size", 0, 0, 0 },
	{ "mode", 0, OPT_MODE, O(mode), "0660", "MODE", "a mode", 0, 0, 0 },
	{ "i64", 0, OPT_I64, O(i64), "-1", "N", "a signed number", 0, 0, 0 },
	{ "f64", 0, OPT_F64, O(f64), "0.5", "X", "a decimal", 0, 100, 0 },
	{ "cli", 0, OPT_FLAG, O(flag), NULL, NULL, "command line only", 0, 0,
	  OPT_F_CLI_ONLY },
	OPT_END,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct conf c;
	struct diag d;
	char path[64], *text = NULL;
	int fd = fuzz_memfd(data, size);

	if (fd < 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (!opts_defaults(table, &c, &d))
		(void)opts_parse_file(table, &c, path, &text, &d);
	free(text);
	close(fd);
	return 0;
}
