/* Cohort runtime: the instruction decoders (decode.c), shared by every file
 * that reads the program's code: patch.c, direct.c, wrapper.c, prefetch.c.
 * Zydis (libzydis-dev); neither decoder allocates. */
#ifndef COHORT_DECODE_H
#define COHORT_DECODE_H

#include <stdbool.h>
#include <Zydis/Zydis.h>

/* Full decoding, operands included: what a patch or an analysis must
 * understand of an instruction. */
extern ZydisDecoder ch_decoder;
/* Zydis's minimal mode: lengths, mnemonics and relative branches only, for
 * walks from a known instruction boundary to a call (still about 850
 * instructions an instruction). */
extern ZydisDecoder ch_decoder_lengths;

/* Both, set up once at start-up (init.c), while the process has one
 * thread; false: Zydis refused, and nothing may read code. */
bool ch_decode_init(void);
bool ch_decode_ready(void);

#endif
