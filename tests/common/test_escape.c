/*
 * test_escape.c - client text made safe to print (common/escape.c), and
 * plog()'s lines with it: control bytes and backslashes escaped so that
 * the text reads back, a result cut before an escape, never inside one,
 * and a message carrying a newline and a priority is one log line.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "escape.h"
#include "plog.h"

Test(escape, control_bytes_and_backslashes)
{
	char out[64];

	cr_expect_eq(esc_text(out, sizeof(out), "a\n<3>b", 6), 9);
	cr_expect_str_eq(out, "a\\x0a<3>b");
	esc_str(out, sizeof(out), "\033[31mred\x7f");
	cr_expect_str_eq(out, "\\x1b[31mred\\x7f");
	esc_str(out, sizeof(out), "c:\\x0a");
	cr_expect_str_eq(out, "c:\\\\x0a", "a backslash reads back as one");
	esc_str(out, sizeof(out), "caf\xc3\xa9 \xe2\x9c\x93");
	cr_expect_str_eq(out, "caf\xc3\xa9 \xe2\x9c\x93", "UTF-8 is kept");
	cr_expect_eq(esc_text(out, sizeof(out), "a\0b", 3), 6);
	cr_expect_str_eq(out, "a\\x00b", "a NUL inside the length too");
}

Test(escape, cut_before_an_escape)
{
	char out[6];

	cr_expect_eq(esc_text(out, sizeof(out), "ab\ncd", 5), 2);
	cr_expect_str_eq(out, "ab", "\\x0a does not fit in what is left");
	cr_expect_eq(esc_text(out, sizeof(out), "abcdefgh", 8), 5);
	cr_expect_str_eq(out, "abcde");
	cr_expect_eq(esc_text(out, 1, "abc", 3), 0);
	cr_expect_str_eq(out, "");
}

Test(escape, plog_line_is_one_line)
{
	char buf[4096];
	int p[2], saved = dup(STDERR_FILENO);
	ssize_t n;

	cr_assert_eq(pipe(p), 0);
	dup2(p[1], STDERR_FILENO);
	plog(PLOG_WARN, "shard %s: bad", "x.lds\n<3>error: forged");
	dup2(saved, STDERR_FILENO);
	close(p[1]);
	n = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	cr_assert_gt(n, 0);
	buf[n] = '\0';
	cr_expect_eq(strchr(buf, '\n'), buf + n - 1, "one line: %s", buf);
	cr_expect(strstr(buf, "<4>") == buf, "%s", buf);
	cr_expect(strstr(buf, "shard x.lds\\x0a<3>error: forged: bad\n"), "%s",
		  buf);
}
