#include "CFFmpeg.h"
#include <stdlib.h>

// Where `frame`'s luma samples lie: *step bytes apart in plane 0, the first *offset bytes
// in (a capture card's packed UYVY has its luma every other byte, from the second); 8-bit
// samples a byte each, 9- to 16-bit ones little-endian in two. Returns their depth; 0 for
// a layout with none such (RGB, palettes, bitstream and big-endian formats), or one whose
// rows the descriptor's step does not fit: packed 4:1:1 (uyyvyy411) has 6 bytes for 4
// pixels, which the descriptor can only call a step of 4, so a row read by it runs far past
// its end (a 16384-wide picture crashed the probe). Every frame read must pass.
static int luma_layout(const AVFrame *frame, int *step, int *offset) {
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(frame->format);
    if (!desc || (desc->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_BE)))
        return 0;
    int depth = desc->comp[0].depth;
    if (desc->comp[0].plane != 0 || desc->comp[0].shift != 0 || depth < 8 || depth > 16 || desc->comp[0].step < (depth > 8 ? 2 : 1))
        return 0;
    // The last sample read of a row (x = width - 1 at most) must lie inside the row.
    int64_t last = (int64_t)(frame->width - 1) * desc->comp[0].step + desc->comp[0].offset + (depth > 8 ? 1 : 0);
    if (frame->linesize[0] <= 0 || last >= frame->linesize[0]) return 0;
    *step = desc->comp[0].step;
    *offset = desc->comp[0].offset;
    return depth;
}

static inline int luma_at(const uint8_t *row, int x, int step, int offset, int wide) {
    const uint8_t *p = row + (ptrdiff_t)x * step + offset;
    return wide ? (int)p[0] | ((int)p[1] << 8) : (int)p[0];
}

// How far two lines' samples lie apart, summed over every other pixel (inlined with
// constant layout arguments for plain 8-bit lines, as weave_row).
static inline __attribute__((always_inline)) uint64_t line_difference(const uint8_t *a, const uint8_t *b, int width,
                                                                      int step, int offset, int wide) {
    uint64_t s = 0;
    for (int x = 0; x < width; x += 2)
        s += (uint64_t)abs(luma_at(a, x, step, offset, wide) - luma_at(b, x, step, offset, wide));
    return s;
}

// Film carried at 29.97 by 3:2 pulldown baked into the pictures (hard telecine) repeats
// one field in two of every five frames: that field is unchanged from the frame before
// while the other one moved. Comparing each field with the same field of the frame before
// shows it (what libavfilter's idet calls repeated fields), on a sample: every other
// pixel of every other line of each field.
int kiln_field_motion(const AVFrame *frame, const AVFrame *previous, double *top, double *bottom) {
    if (!frame || !previous || frame->format != previous->format || frame->width != previous->width
        || frame->height != previous->height || frame->width < 4 || frame->height < 8)
        return AVERROR(EINVAL);
    int step, offset, depth = luma_layout(frame, &step, &offset);
    if (!depth || !luma_layout(previous, &step, &offset) || !frame->data[0] || !previous->data[0]) return AVERROR(EINVAL);
    int wide = depth > 8;
    double scale = 1.0 / (1 << (depth - 8));
    uint64_t sum[2] = { 0, 0 }, count[2] = { 0, 0 };
    // Lines 4k (top field) and 4k+1 (bottom field): every other line of each field.
    for (int y = 0; y + 1 < frame->height; y += 4) {
        for (int field = 0; field < 2; field++) {
            const uint8_t *a = frame->data[0] + (ptrdiff_t)(y + field) * frame->linesize[0];
            const uint8_t *b = previous->data[0] + (ptrdiff_t)(y + field) * previous->linesize[0];
            sum[field] += !wide && step == 1 && offset == 0 ? line_difference(a, b, frame->width, 1, 0, 0)
                                                             : line_difference(a, b, frame->width, step, offset, wide);
            count[field] += (uint64_t)(frame->width + 1) / 2;
        }
    }
    *top = count[0] ? (double)sum[0] / (double)count[0] * scale : 0;
    *bottom = count[1] ? (double)sum[1] / (double)count[1] * scale : 0;
    return 0;
}

// Whether a line of the woven picture combs: off both its neighbours the same way, by the
// smaller of the two differences (0 where it lies between them: an edge or a slope).
static inline int comb_amount(int above, int line, int below) {
    int a = line - above, b = line - below;
    int least = abs(a) < abs(b) ? abs(a) : abs(b);
    return (a > 0 && b > 0) || (a < 0 && b < 0) ? least : 0;
}

// One row of kiln_weave_combing: the bottom-field line of the picture before (pb), this
// one (fb) and the next (nb), between the top-field lines above and below it of this
// picture (fa, fz), the one before (pa, pz) and the next (na, nz); every other pixel.
// Inlined with constant layout arguments, so that 8-bit planar pictures (nearly all) read
// plain bytes, each sample loaded once, not once per weave that uses it; and written
// without branches, so that the compiler vectorizes it (the probe of interlaced video
// spent half its time here, 5x what it does now, with the same counts).
static inline __attribute__((always_inline)) void weave_row(
    const uint8_t *fa, const uint8_t *fz, const uint8_t *pa, const uint8_t *pz, const uint8_t *na, const uint8_t *nz,
    const uint8_t *pb, const uint8_t *fb, const uint8_t *nb, int width, int step, int offset, int wide, int threshold,
    int64_t counts[5], int64_t ups[5], int64_t downs[5], int64_t *looked) {
    // A row's sums fit 32 bits unsigned (65,535 at most per sample, half a row of up to
    // 131,070 pixels sampled), and 32-bit lanes vectorize twice as wide as 64-bit ones.
    uint32_t rowCounts[5] = { 0 }, rowUps[5] = { 0 }, rowDowns[5] = { 0 };
    for (int x = 0; x < width; x += 2) {
        int f1 = luma_at(fa, x, step, offset, wide), f2 = luma_at(fz, x, step, offset, wide);
        int p1 = luma_at(pa, x, step, offset, wide), p2 = luma_at(pz, x, step, offset, wide);
        int n1 = luma_at(na, x, step, offset, wide), n2 = luma_at(nz, x, step, offset, wide);
        int vp = luma_at(pb, x, step, offset, wide), vf = luma_at(fb, x, step, offset, wide);
        int vn = luma_at(nb, x, step, offset, wide);
        // The weaves in kiln_weave_combing's order: (top, bottom) = (this, before),
        // (this, this), (this, next), (before, this), (next, this).
        int t1[5] = { f1, f1, f1, p1, n1 }, v[5] = { vp, vf, vn, vf, vf }, t2[5] = { f2, f2, f2, p2, n2 };
        int c[5], least = INT32_MAX;
        for (int w = 0; w < 5; w++) {
            c[w] = comb_amount(t1[w], v[w], t2[w]);
            least = c[w] < least ? c[w] : least;
        }
        int moved = 0;
        for (int w = 0; w < 5; w++) {
            int m = c[w] - least > threshold;
            rowCounts[w] += (uint32_t)m;
            moved |= m;
        }
        // Where the picture moves, how far each weave's line lies from the line above
        // and the line below it: alike for a whole picture, while video tilting by a
        // line a field weaves into lines each equal to its neighbour on one side.
        int keep = -moved;
        for (int w = 0; w < 5; w++) {
            rowUps[w] += (uint32_t)(abs(v[w] - t1[w]) & keep);
            rowDowns[w] += (uint32_t)(abs(v[w] - t2[w]) & keep);
        }
    }
    for (int w = 0; w < 5; w++) {
        counts[w] += rowCounts[w];
        ups[w] += rowUps[w];
        downs[w] += rowDowns[w];
    }
    *looked += (width + 1) / 2;
}

// Progressive pictures stored interlaced (PAL's 25PsF, 29.97p in interlaced MPEG-2, film
// in 2:2 shifted by a field, 3:2 pulldown) weave whole, each picture's field with the
// other field of its own picture or a neighbour's: that weave does not comb where the
// picture moves, the others do. Video shot interlaced combs about alike in three weaves
// (the other fields half a picture's time away). A pixel counts against a weave where it
// combs more than in the least-combed weave, by more than the threshold: detail combs
// alike in all of them, so fine detail and a picture mostly still judge by the motion.
int kiln_weave_combing(const AVFrame *previous, const AVFrame *frame, const AVFrame *next, int comb_threshold,
                       int64_t combed[5], int64_t above[5], int64_t below[5], int64_t *sampled) {
    // The weaves (top field, bottom field): fieldmatch's p, c, n from the top field, then
    // the bottom field with the top of the picture before and after (weave_row).
    if (!frame || !frame->data[0] || !previous || !next) return AVERROR(EINVAL);
    for (int w = 0; w < 5; w += 2) {
        const AVFrame *b = w == 0 ? previous : next;
        if (!b->data[0] || b->format != frame->format || b->width != frame->width || b->height != frame->height)
            return AVERROR(EINVAL);
    }
    if (frame->width < 4 || frame->height < 8) return AVERROR(EINVAL);
    int step, offset, depth = luma_layout(frame, &step, &offset);
    if (!depth || !luma_layout(previous, &step, &offset) || !luma_layout(next, &step, &offset)) return AVERROR(EINVAL);
    int wide = depth > 8;
    int shift = depth - 8;
    int threshold = comb_threshold << shift;
    int64_t counts[5] = { 0 }, ups[5] = { 0 }, downs[5] = { 0 }, looked = 0;
    // Bottom-field lines 4k+1 between top-field lines 4k and 4k+2.
    for (int y = 1; y + 1 < frame->height; y += 4) {
#define ROW(f, k) ((f)->data[0] + (ptrdiff_t)(y + (k)) * (f)->linesize[0])
        const uint8_t *fa = ROW(frame, -1), *fz = ROW(frame, 1), *pa = ROW(previous, -1), *pz = ROW(previous, 1),
                      *na = ROW(next, -1), *nz = ROW(next, 1), *pb = ROW(previous, 0), *fb = ROW(frame, 0), *nb = ROW(next, 0);
#undef ROW
        if (!wide && step == 1 && offset == 0)
            weave_row(fa, fz, pa, pz, na, nz, pb, fb, nb, frame->width, 1, 0, 0, threshold, counts, ups, downs, &looked);
        else
            weave_row(fa, fz, pa, pz, na, nz, pb, fb, nb, frame->width, step, offset, wide, threshold, counts, ups, downs, &looked);
    }
    for (int w = 0; w < 5; w++) {
        combed[w] = counts[w];
        above[w] = ups[w] >> shift;
        below[w] = downs[w] >> shift;
    }
    *sampled = looked;
    return 0;
}
