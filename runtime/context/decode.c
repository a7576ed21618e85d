/* Cohort runtime: the instruction decoders, one of each kind for the whole
 * runtime (decode.h), where four files kept their own. */
#include "decode.h"

ZydisDecoder ch_decoder;
ZydisDecoder ch_decoder_lengths;
static int state;   /* 0: not yet, 1: ready, -1: failed */

bool ch_decode_init(void) {
  if (!state)
    state = ZYAN_SUCCESS(ZydisDecoderInit(&ch_decoder, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)) &&
            ZYAN_SUCCESS(ZydisDecoderInit(&ch_decoder_lengths, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64)) &&
            ZYAN_SUCCESS(ZydisDecoderEnableMode(&ch_decoder_lengths, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE))
        ? 1 : -1;
  return state > 0;
}

bool ch_decode_ready(void) { return state > 0; }
