/*
 * wire_print decodes message bodies with the C init's generated decoder
 * (internal/programs/init/wire.h) and prints each as the Go differential
 * test (cdecoder_test.go) prints the Go values: its input is a sequence of
 * bodies, each after its length (4 bytes, little-endian); its output, per
 * body, "ok" and one line a value, or "error", then "end".
 */
#define WIRE_PRINT
#include "../../programs/init/wire.h"

static int read_all(unsigned char *p, size_t n)
{
	while (n > 0) {
		size_t got = fread(p, 1, n, stdin);
		if (got == 0)
			return -1;
		p += got;
		n -= got;
	}
	return 0;
}

int main(void)
{
	unsigned char hdr[4];
	while (fread(hdr, 1, 1, stdin) == 1) {
		if (read_all(hdr + 1, 3) != 0)
			return 2;
		uint32_t size = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 | (uint32_t)hdr[3] << 24;
		if (size > WIRE_MAX_MESSAGE)
			return 2;
		unsigned char *body = wire_alloc(size, 1);
		if (read_all(body, size) != 0)
			return 2;
		struct wire_message m;
		if (wire_decode(body, size, &m) == 0) {
			puts("ok");
			wire_print(stdout, &m);
		} else {
			puts("error");
		}
		puts("end");
		wire_free(&m);
		free(body);
	}
	return fflush(stdout) == 0 ? 0 : 2;
}
