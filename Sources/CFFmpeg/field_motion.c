#include "CFFmpeg.h"
#include <stdlib.h>

// Film carried at 29.97 by 3:2 pulldown baked into the pictures (hard telecine) repeats
// one field in two of every five frames: that field is unchanged from the frame before
// while the other one moved. Comparing each field with the same field of the frame before
// shows it (what libavfilter's idet calls repeated fields), on a sample: every other
// pixel of every other line of each field.
int kiln_field_motion(const AVFrame *frame, const AVFrame *previous, double *top, double *bottom) {
    if (!frame || !previous || frame->format != previous->format || frame->width != previous->width
        || frame->height != previous->height || frame->width < 4 || frame->height < 8)
        return AVERROR(EINVAL);
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(frame->format);
    if (!desc || (desc->flags & (AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL | AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL | AV_PIX_FMT_FLAG_BE))
        || desc->comp[0].plane != 0 || desc->comp[0].step > 2 || desc->comp[0].depth < 8 || desc->comp[0].depth > 16
        || !frame->data[0] || !previous->data[0])
        return AVERROR(EINVAL);
    int wide = desc->comp[0].depth > 8;
    double scale = 1.0 / (1 << (desc->comp[0].depth - 8));
    uint64_t sum[2] = { 0, 0 }, count[2] = { 0, 0 };
    // Lines 4k (top field) and 4k+1 (bottom field): every other line of each field.
    for (int y = 0; y + 1 < frame->height; y += 4) {
        for (int field = 0; field < 2; field++) {
            const uint8_t *a = frame->data[0] + (ptrdiff_t)(y + field) * frame->linesize[0];
            const uint8_t *b = previous->data[0] + (ptrdiff_t)(y + field) * previous->linesize[0];
            uint64_t s = 0;
            if (wide) {
                const uint16_t *a16 = (const uint16_t *)a, *b16 = (const uint16_t *)b;
                for (int x = 0; x < frame->width; x += 2) s += (uint64_t)abs((int)a16[x] - (int)b16[x]);
            } else {
                for (int x = 0; x < frame->width; x += 2) s += (uint64_t)abs((int)a[x] - (int)b[x]);
            }
            sum[field] += s;
            count[field] += (uint64_t)(frame->width + 1) / 2;
        }
    }
    *top = count[0] ? (double)sum[0] / (double)count[0] * scale : 0;
    *bottom = count[1] ? (double)sum[1] / (double)count[1] * scale : 0;
    return 0;
}
