/*
 * verfake.c - a shared library that says it is libloader 2.0: the Python
 * package must refuse to import over it (tests/client/python/test_import).
 * Exported by hand: the build hides every symbol by default.
 */
__attribute__((visibility("default"))) int loader_version(void);

int loader_version(void)
{
	return 2000;
}
