/* Well-formed UTF-8 (core, internal; C and C++). Header-only, for the
 * interposer, which links nothing of rtaccel. JSON is UTF-8, and what
 * rtaccel writes into it (a program's command line, a library's path, a
 * workload's text) may be any bytes. */
#ifndef RTACCEL_CORE_UTF8_H
#define RTACCEL_CORE_UTF8_H

#include <stddef.h>

/* The length (1 to 4) of the well-formed UTF-8 sequence that starts S, of
 * LEFT bytes; 0 where none does: a stray continuation byte, an overlong
 * form, a surrogate, a code point past U+10FFFF, a sequence cut short. */
static inline size_t rtaccel_utf8_sequence(const unsigned char *s, size_t left)
{
	if (left == 0)
		return 0;
	const unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* overlong */
		if (c == 0xed)
			hi = 0x9f; /* surrogates */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90; /* overlong */
		if (c == 0xf4)
			hi = 0x8f; /* past U+10FFFF */
	} else {
		return 0;
	}
	if (left < n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t k = 2; k < n; k++)
		if (s[k] < 0x80 || s[k] > 0xbf)
			return 0;
	return n;
}

#endif
