// A bit reader for H.264 and H.265 parameter sets and slice headers (ITU-T H.264 7.2,
// H.265 7.2): fixed-width fields, Exp-Golomb codes, and NAL payloads without their
// emulation prevention bytes. Reading past the end sets `error` and yields zeros, so a
// parser checks once, at the end, instead of after every field.
#ifndef KILN_BIT_READER_H
#define KILN_BIT_READER_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const uint8_t *buf;
    size_t bits, pos;
    int error;
} Bits;

static inline unsigned bit(Bits *b) {
    if (b->pos >= b->bits) { b->error = 1; return 0; }
    unsigned v = (b->buf[b->pos >> 3] >> (7 - (b->pos & 7))) & 1;
    b->pos++;
    return v;
}

static inline uint32_t bits(Bits *b, int n) {
    uint32_t v = 0;
    while (n-- > 0) v = (v << 1) | bit(b);
    return v;
}

static inline void skip(Bits *b, size_t n) {
    b->pos += n;
    if (b->pos > b->bits) b->error = 1;
}

static inline uint32_t ue(Bits *b) {
    int zeros = 0;
    while (!bit(b)) {
        if (b->error || ++zeros > 31) { b->error = 1; return 0; }
    }
    return (uint32_t)(((uint64_t)1 << zeros) - 1 + bits(b, zeros));
}

static inline int32_t se(Bits *b) {
    uint32_t v = ue(b);
    return (v & 1) ? (int32_t)((v + 1) / 2) : -(int32_t)(v / 2);
}

// A NAL unit's payload without its emulation prevention bytes (00 00 03 -> 00 00).
static inline size_t unescape(const uint8_t *src, size_t n, uint8_t *dst) {
    size_t o = 0;
    int zeros = 0;
    for (size_t i = 0; i < n; i++) {
        if (zeros >= 2 && src[i] == 3) { zeros = 0; continue; }
        dst[o++] = src[i];
        zeros = src[i] == 0 ? zeros + 1 : 0;
    }
    return o;
}

#endif
