/*
 * escape.h - text that came from a client, made safe to print: in a log
 * line, where a newline would start a line of its own (and "<3>" after
 * it pass with journald for one of loaderd's errors), and in loaderctl's
 * tables, where an escape sequence would reach the operator's terminal
 * and a newline would make a row of its own.
 */
#ifndef LD_ESCAPE_H
#define LD_ESCAPE_H

#include <stddef.h>

/*
 * Copy len bytes of src into dst (cap bytes, NUL-terminated; cap >= 1),
 * each control byte (below 0x20, and 0x7f) as \xNN and each backslash
 * as \\, so that what is printed reads back to the bytes given. A
 * result longer than cap is cut before an escape, never inside one.
 * Returns the bytes written, NUL excluded.
 */
size_t esc_text(char *dst, size_t cap, const char *src, size_t len);

/* esc_text() of a NUL-terminated string, into a buffer of cap bytes. */
const char *esc_str(char *dst, size_t cap, const char *src);

#endif /* LD_ESCAPE_H */
