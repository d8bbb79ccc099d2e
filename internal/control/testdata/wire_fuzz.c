/*
 * wire_fuzz is the libFuzzer target of the C init's generated decoder
 * (internal/programs/init/wire.h), built alone with ASan and UBSan by
 * make fuzz. Beyond what the sanitizers catch, a body the decoder accepts
 * must encode to one it accepts again, and that one must encode to itself
 * (a decoded message is whole and within its bounds).
 */
#include "../../programs/init/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_message m;
	if (wire_decode(data, size, &m) != 0) {
		wire_free(&m);
		return 0;
	}
	struct wire_writer once = {0};
	wire_encode(&once, &m);
	wire_free(&m);

	struct wire_message again;
	if (wire_decode(once.buf, once.len, &again) != 0)
		abort(); /* a decoded message that does not encode to a valid one */
	struct wire_writer twice = {0};
	wire_encode(&twice, &again);
	if (twice.len != once.len || memcmp(twice.buf, once.buf, once.len) != 0)
		abort(); /* encoding is not stable */
	wire_free(&again);
	free(once.buf);
	free(twice.buf);
	return 0;
}
