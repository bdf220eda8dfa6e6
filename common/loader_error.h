/*
 * loader_error.h - loaderd's error codes and loader_strerror().
 *
 * Public (installed beside loader.h, which includes it) and the lowest
 * layer of the project: every folder may include it, and it depends on
 * nothing but the C library. Functions return 0 or a negative code:
 * either -errno, or one of the LOADER_E* codes below, which sit in a
 * range that no errno reaches.
 */
#ifndef LOADER_ERROR_H
#define LOADER_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LOADER_BUILDING) && defined(__GNUC__)
#define LOADER_API __attribute__((visibility("default")))
#else
#define LOADER_API
#endif

/*
 * Our own error codes. They are negative, like -errno, and sit below
 * LOADER_ERRNO_MAX so that they can never be mistaken for one.
 */
#define LOADER_ERRNO_MAX 4095

enum loader_error {
	LOADER_EFORMAT = -4096, /* malformed data: bad magic, bad structure */
	LOADER_EVERSION =
		-4097,	       /* a format or protocol version we do not know */
	LOADER_ETRUNC = -4098, /* data ends before its structure says it does */
	LOADER_ECHECKSUM = -4099, /* stored and computed checksums differ */
	LOADER_ESCHEMA = -4100, /* a schema that is invalid or does not match */
	LOADER_EDECODE = -4101, /* a field's payload does not decode */
	LOADER_ERANGE = -4102,	/* an index, offset or size out of range */
	LOADER_ETOOBIG = -4103, /* a size above a configured limit */
	LOADER_EUSAGE = -4104,	/* invalid option or argument */
	LOADER_EPROTO = -4105,	/* a malformed protocol message */
	LOADER_EEND = -4106,	/* the stream delivered all its epochs */
	LOADER_ESTREAM = -4107, /* the daemon stopped the stream: see
				   loader_reason() */
};

/*
 * Describe an error code: a LOADER_E* code or a -errno value.
 * Returns a static string; it is never NULL and stays valid for the life
 * of the process.
 */
LOADER_API const char *loader_strerror(int err);

#ifdef __cplusplus
}
#endif

#endif /* LOADER_ERROR_H */
