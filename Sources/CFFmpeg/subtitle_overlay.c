// Bitmap subtitles painted into 8-bit 4:2:0 pictures (burnt-in forced subtitles).
//
// A decoded bitmap subtitle (PGS, DVD, DVB, XSUB) is a few palette pictures placed on a
// canvas (the disc's 1920x1080 or 720x576, which need not be the video's size). The canvas
// is fitted into the picture as players show it (see kiln_overlay_new); each output pixel
// is the mean of the canvas area it covers (bilinear samples on a grid as fine as the
// whole part of the reduction), so strokes one pixel wide on a 4K canvas still show at
// 480 lines. The overlay keeps premultiplied Y'CbCr in the
// output's matrix and limited range; chroma is the 2x2 mean of its luma positions.
#include "CFFmpeg.h"
#include <math.h>

struct KilnOverlay {
    int x, y, width, height;  // in the picture, all even
    uint8_t *luma;            // width x height, premultiplied Y'
    uint8_t *alpha;           // width x height
    uint8_t *cb, *cr;         // (width/2) x (height/2), premultiplied
    uint8_t *chroma_alpha;    // (width/2) x (height/2)
};

typedef struct { float r, g, b, a; } Premultiplied;

// A palette entry (libavcodec's AV_PIX_FMT_RGB32: 0xAARRGGBB in a native uint32) premultiplied.
static Premultiplied entry(const uint32_t *palette, uint8_t index) {
    uint32_t c = palette[index];
    float a = (float)(c >> 24) / 255.0f;
    return (Premultiplied){ a * (float)((c >> 16) & 0xff), a * (float)((c >> 8) & 0xff), a * (float)(c & 0xff), a };
}

// The rectangle's premultiplied colour at canvas point (cx, cy) (pixel centres at +0.5),
// bilinear; outside the rectangle it is transparent.
static Premultiplied sample(const AVSubtitleRect *r, float cx, float cy) {
    Premultiplied out = { 0, 0, 0, 0 };
    float fx = cx - (float)r->x - 0.5f, fy = cy - (float)r->y - 0.5f;
    if (fx <= -1.0f || fy <= -1.0f || fx >= (float)r->w || fy >= (float)r->h) return out;
    int x0 = (int)floorf(fx), y0 = (int)floorf(fy);
    float wx = fx - (float)x0, wy = fy - (float)y0;
    const uint32_t *palette = (const uint32_t *)r->data[1];
    for (int j = 0; j < 2; j++) {
        int py = y0 + j;
        if (py < 0 || py >= r->h) continue;
        float w_y = j ? wy : 1.0f - wy;
        for (int i = 0; i < 2; i++) {
            int px = x0 + i;
            if (px < 0 || px >= r->w) continue;
            float w = w_y * (i ? wx : 1.0f - wx);
            uint8_t index = r->data[0][(size_t)py * (size_t)r->linesize[0] + (size_t)px];
            if (index >= r->nb_colors) continue;  // past the palette: nothing there
            Premultiplied p = entry(palette, index);
            out.r += w * p.r; out.g += w * p.g; out.b += w * p.b; out.a += w * p.a;
        }
    }
    return out;
}

// A rectangle with pictures to draw (a damaged stream's empty or text rectangles are not).
static int drawable(const AVSubtitleRect *r) {
    return r->type == SUBTITLE_BITMAP && r->w > 0 && r->h > 0 && r->linesize[0] >= r->w && r->nb_colors > 0 && r->data[0] && r->data[1];
}

// Where the canvas sits in the picture: canvas x lands at ox + x·sx, y at oy + y·sy.
typedef struct { float sx, sy, ox, oy; } Placement;

// A rectangle's pixels in the picture, a pixel wider on each side for the filter:
// [x0, x1) x [y0, y1), not clipped.
static void place(const AVSubtitleRect *r, Placement p, int *x0, int *y0, int *x1, int *y1) {
    *x0 = (int)floorf(p.ox + (float)r->x * p.sx) - 1;
    *y0 = (int)floorf(p.oy + (float)r->y * p.sy) - 1;
    *x1 = (int)ceilf(p.ox + (float)(r->x + r->w) * p.sx) + 1;
    *y1 = (int)ceilf(p.oy + (float)(r->y + r->h) * p.sy) + 1;
}

static uint8_t byte(float v) { return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)(v + 0.5f); }

void kiln_overlay_free(KilnOverlay **o) {
    if (!o || !*o) return;
    av_freep(&(*o)->luma);
    av_freep(&(*o)->alpha);
    av_freep(&(*o)->cb);
    av_freep(&(*o)->cr);
    av_freep(&(*o)->chroma_alpha);
    av_freep(o);
}

KilnOverlay *kiln_overlay_new(AVSubtitleRect *const *rects, int count, int canvas_width, int canvas_height,
                              double canvas_pixel_aspect, int width, int height, int bt601, int *error) {
    *error = 0;
    if (canvas_width <= 0 || canvas_height <= 0 || width < 2 || height < 2 || !(canvas_pixel_aspect >= 0)) {
        *error = AVERROR(EINVAL);
        return NULL;
    }
    // The canvas's pixels take their shape (`canvas_pixel_aspect`, width over height) and the
    // canvas is fitted into the picture at that shape, centred (as mpv shows it): a disc's
    // 1920x1080 canvas over a rip cropped to 1920x800 keeps its letters' shape, and its
    // lines, placed in the disc's black bars, stay inside the picture; a DVD's 720x480 over
    // its anamorphic picture is as wide as the picture. 0: the canvas is the whole picture.
    float sx, sy;
    if (canvas_pixel_aspect == 0) {
        sx = (float)width / (float)canvas_width;
        sy = (float)height / (float)canvas_height;
    } else {
        float pa = (float)canvas_pixel_aspect;
        sy = fminf((float)width / ((float)canvas_width * pa), (float)height / (float)canvas_height);
        sx = sy * pa;
    }
    float ox = ((float)width - (float)canvas_width * sx) / 2.0f, oy = ((float)height - (float)canvas_height * sy) / 2.0f;
    Placement fit = { sx, sy, ox, oy };
    // The rectangles' bounds in the picture, widened to even positions and clipped.
    int x0 = width, y0 = height, x1 = 0, y1 = 0;
    for (int i = 0; i < count; i++) {
        const AVSubtitleRect *r = rects[i];
        if (!drawable(r)) continue;
        int rx0, ry0, rx1, ry1;
        place(r, fit, &rx0, &ry0, &rx1, &ry1);
        if (rx0 < x0) x0 = rx0;
        if (ry0 < y0) y0 = ry0;
        if (rx1 > x1) x1 = rx1;
        if (ry1 > y1) y1 = ry1;
    }
    x0 = x0 < 0 ? 0 : x0 & ~1;
    y0 = y0 < 0 ? 0 : y0 & ~1;
    x1 = x1 > width ? width & ~1 : (x1 + 1) & ~1;
    y1 = y1 > height ? height & ~1 : (y1 + 1) & ~1;
    if (x1 <= x0 || y1 <= y0) return NULL;  // nothing on the picture: no overlay, no error

    KilnOverlay *o = av_mallocz(sizeof(*o));
    if (!o) { *error = AVERROR(ENOMEM); return NULL; }
    o->x = x0; o->y = y0; o->width = x1 - x0; o->height = y1 - y0;
    size_t n = (size_t)o->width * (size_t)o->height, nc = n / 4;
    o->luma = av_malloc(n); o->alpha = av_malloc(n);
    o->cb = av_malloc(nc); o->cr = av_malloc(nc); o->chroma_alpha = av_malloc(nc);
    Premultiplied *px = av_calloc(n, sizeof(*px));
    if (!o->luma || !o->alpha || !o->cb || !o->cr || !o->chroma_alpha || !px) {
        av_free(px);
        kiln_overlay_free(&o);
        *error = AVERROR(ENOMEM);
        return NULL;
    }
    // Samples per output pixel on each axis: as many as whole canvas pixels it covers (at most 8).
    int k = (int)floorf(1.0f / fminf(sx, sy) + 0.01f);
    k = k < 1 ? 1 : k > 8 ? 8 : k;
    // Each rectangle over the ones before ("over", premultiplied), each over its own area
    // only: the work is the rectangles' area, however many a damaged stream lists.
    for (int m = 0; m < count; m++) {
        const AVSubtitleRect *r = rects[m];
        if (!drawable(r)) continue;
        int rx0, ry0, rx1, ry1;
        place(r, fit, &rx0, &ry0, &rx1, &ry1);
        // In the overlay's own coordinates, clipped to it.
        rx0 -= x0; ry0 -= y0; rx1 -= x0; ry1 -= y0;
        rx0 = rx0 < 0 ? 0 : rx0; ry0 = ry0 < 0 ? 0 : ry0;
        rx1 = rx1 > o->width ? o->width : rx1; ry1 = ry1 > o->height ? o->height : ry1;
        for (int y = ry0; y < ry1; y++) {
            for (int x = rx0; x < rx1; x++) {
                Premultiplied q = { 0, 0, 0, 0 };
                for (int j = 0; j < k; j++) {
                    float cy = ((float)(y0 + y) + ((float)j + 0.5f) / (float)k - oy) / sy;
                    for (int i = 0; i < k; i++) {
                        Premultiplied v = sample(r, ((float)(x0 + x) + ((float)i + 0.5f) / (float)k - ox) / sx, cy);
                        q.r += v.r; q.g += v.g; q.b += v.b; q.a += v.a;
                    }
                }
                float s = 1.0f / (float)(k * k);
                Premultiplied *d = &px[(size_t)y * (size_t)o->width + (size_t)x];
                float keep = 1.0f - q.a * s;
                d->r = q.r * s + keep * d->r; d->g = q.g * s + keep * d->g; d->b = q.b * s + keep * d->b; d->a = q.a * s + keep * d->a;
            }
        }
    }
    const float kr = bt601 ? 0.299f : 0.2126f, kb = bt601 ? 0.114f : 0.0722f, kg = 1.0f - kr - kb;
    for (size_t at = 0; at < n; at++) {
        Premultiplied c = px[at];
        float luma = kr * c.r + kg * c.g + kb * c.b;  // premultiplied, 0…255·a
        o->luma[at] = byte(16.0f * c.a + luma * (219.0f / 255.0f));
        o->alpha[at] = byte(c.a * 255.0f);
        // Cb and Cr (premultiplied) kept in place for the 2x2 means below.
        px[at].r = 128.0f * c.a + (c.b - luma) * (224.0f / 255.0f) / (2.0f * (1.0f - kb));
        px[at].g = 128.0f * c.a + (c.r - luma) * (224.0f / 255.0f) / (2.0f * (1.0f - kr));
    }
    int cw = o->width / 2;
    for (int y = 0; y < o->height / 2; y++) {
        for (int x = 0; x < cw; x++) {
            size_t a = (size_t)(2 * y) * (size_t)o->width + (size_t)(2 * x), b = a + (size_t)o->width;
            size_t c = (size_t)y * (size_t)cw + (size_t)x;
            o->cb[c] = byte((px[a].r + px[a + 1].r + px[b].r + px[b + 1].r) / 4.0f);
            o->cr[c] = byte((px[a].g + px[a + 1].g + px[b].g + px[b + 1].g) / 4.0f);
            o->chroma_alpha[c] = byte((px[a].a + px[a + 1].a + px[b].a + px[b + 1].a) * (255.0f / 4.0f));
        }
    }
    av_free(px);
    return o;
}

// dst·(1 − α) + premultiplied source, in 8 bits.
static void blend_plane(uint8_t *dst, int dst_stride, const uint8_t *src, const uint8_t *alpha, int width, int height) {
    for (int y = 0; y < height; y++) {
        uint8_t *d = dst + (size_t)y * (size_t)dst_stride;
        const uint8_t *s = src + (size_t)y * (size_t)width, *a = alpha + (size_t)y * (size_t)width;
        for (int x = 0; x < width; x++) {
            if (!a[x]) continue;
            int v = (d[x] * (255 - a[x]) + 127) / 255 + s[x];
            d[x] = (uint8_t)(v > 255 ? 255 : v);
        }
    }
}

int kiln_overlay_blend(const KilnOverlay *o, AVFrame *frame) {
    if (!o) return 0;
    if (frame->format != AV_PIX_FMT_YUV420P) return AVERROR(EINVAL);
    if (o->x + o->width > frame->width || o->y + o->height > frame->height) return AVERROR(EINVAL);
    blend_plane(frame->data[0] + (size_t)o->y * (size_t)frame->linesize[0] + (size_t)o->x, frame->linesize[0],
                o->luma, o->alpha, o->width, o->height);
    size_t off1 = (size_t)(o->y / 2) * (size_t)frame->linesize[1] + (size_t)(o->x / 2);
    size_t off2 = (size_t)(o->y / 2) * (size_t)frame->linesize[2] + (size_t)(o->x / 2);
    blend_plane(frame->data[1] + off1, frame->linesize[1], o->cb, o->chroma_alpha, o->width / 2, o->height / 2);
    blend_plane(frame->data[2] + off2, frame->linesize[2], o->cr, o->chroma_alpha, o->width / 2, o->height / 2);
    return 0;
}
