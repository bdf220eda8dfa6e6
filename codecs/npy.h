/*
 * npy.h - NumPy's .npy format: the header that says what array follows
 * (dtype, order, shape), read and written. The array's bytes come right
 * after the header, C order unless the header says Fortran.
 *
 * Reading never trusts the header: lengths, the dict's syntax and every
 * number are checked against the buffer, and anything but a plain dtype
 * ('<f4', '|u1', ...) with a tuple shape is refused with the reason.
 */
#ifndef LD_NPY_H
#define LD_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "diag.h"

#define NPY_MAX_DIMS 8
/* A header of more than this is refused (numpy writes a few dozen bytes). */
#define NPY_HEADER_MAX 4096

struct npy_info {
	char order;	   /* '<' little-endian, '>' big, '|' not applicable */
	char kind;	   /* 'b' bool, 'i' signed, 'u' unsigned, 'f' float */
	uint32_t itemsize; /* bytes per element: 1, 2, 4 or 8 */
	bool fortran;	   /* the data is in Fortran (column-major) order */
	uint32_t ndim;
	uint64_t dims[NPY_MAX_DIMS];
	uint64_t count;	 /* elements: the product of dims (1 for ndim 0) */
	size_t data_off; /* where the array's bytes start */
};

/*
 * Parse the header of the .npy file in buf[0..len) (len may stop after
 * the header). Returns 0 with *info filled; LOADER_EFORMAT for what is
 * not a .npy header or is damaged; -ENOTSUP for a valid one this module
 * does not take (structured or object dtypes, complex numbers, more than
 * NPY_MAX_DIMS dimensions); LOADER_ETOOBIG for a shape whose size
 * overflows 64 bits. d gets the reason.
 */
int npy_parse(const void *buf, size_t len, struct npy_info *info,
	      struct diag *d);

/*
 * Check that a .npy file of len bytes, whose header parsed to info, holds
 * its array and nothing more. Returns 0 or LOADER_EFORMAT, with both
 * sizes in d.
 */
int npy_check_size(const struct npy_info *info, size_t len, struct diag *d);

/*
 * Write a version 1.0 header for an array of kind/itemsize elements in
 * the machine's byte order, C order, of shape dims[0..ndim), into hdr
 * (cap bytes), padded as numpy pads it (to a multiple of 64). Returns its
 * length, or 0 if it does not fit cap or ndim > NPY_MAX_DIMS.
 */
size_t npy_write_header(char kind, uint32_t itemsize, const uint32_t *dims,
			uint32_t ndim, unsigned char *hdr, size_t cap);

#endif /* LD_NPY_H */
