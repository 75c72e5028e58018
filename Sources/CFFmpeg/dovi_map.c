// Dolby Vision profile 5 (IPTPQc2) to linear BT.2020 RGB, in software: the picture a
// Dolby Vision display would show before its own tone mapping. See CFFmpeg.h.
//
// The base layer of profile 5 is not a picture anyone can watch: its planes are I, P and
// T of the IPT-PQ-c2 colour space, reshaped per scene by curves the RPU carries. The
// decoder (libavcodec parses the RPU) hands them to us as AV_FRAME_DATA_DOVI_METADATA.
// Per pixel, with every component normalised by the base layer's code range:
//   1. reshape: each component through its piecewise polynomial or MMR curve (MMR mixes
//      all three original components), clamped to the curve's first and last pivot;
//   2. L'M'S' = ycc_to_rgb · (reshaped − offset)     (the RPU's "nonlinear" matrix);
//   3. LMS = PQ EOTF(L'M'S')                          (1.0 = 10 000 cd/m²);
//   4. RGB = HPE LMS→RGB · rgb_to_lms · LMS           (BT.2020 primaries, linear light).
// This is the order libplacebo uses; the HPE matrix is the inverse of the BT.2020-referred
// Hunt-Pointer-Estevez LMS transform without crosstalk (the crosstalk is in rgb_to_lms).
//
// The picture is scaled to the output size first, component by component (4:4:4, 16 bit),
// so the per-pixel work is done for the pixels that are kept: a UHD source read for a
// 1080p output costs a quarter. Scaling the non-linear IPT values is the same compromise
// as scaling Y'CbCr before tone mapping everywhere else in the engine.
#include "CFFmpeg.h"
#include <math.h>
#include <string.h>

// The PQ curve tabulated at 16-bit input precision: nearest entry, no interpolation; a
// step is under 0.03 % of the light at the top of the range, far below 8-bit output steps.
enum { PQ_LUT_SIZE = 65535 };

typedef struct {
    int pieces;                  // num_pivots - 1
    float pivot[AV_DOVI_MAX_PIECES + 1];
    int mmr;                     // any MMR piece: evaluated per pixel
    float *lut;                  // 65536 entries when every piece is polynomial
    float poly[AV_DOVI_MAX_PIECES][3];
    int is_mmr[AV_DOVI_MAX_PIECES];
    int mmr_order[AV_DOVI_MAX_PIECES];
    float mmr_const[AV_DOVI_MAX_PIECES];
    float mmr_coef[AV_DOVI_MAX_PIECES][3][7];
} Curve;

struct KilnDoviMapper {
    struct SwsContext *sws;
    int src_w, src_h, src_fmt, dst_w, dst_h;
    uint16_t *planes[3];         // the scaled 4:4:4 16-bit I, P, T planes
    size_t plane_pixels;
    uint8_t *metadata;           // the RPU the curves below were built from
    size_t metadata_size;
    Curve curve[3];
    float nonlinear[9], offset[3], linear[9];
    float peak_nits;             // from the RPU's source_max_pq
    double white_nits;           // the cd/m2 that linear 1.0 stands for
    float *pq_lut;               // PQ_LUT_SIZE + 1 entries
    // 16-bit sample → the base layer's normalised code (code / (2^depth − 1)): libswscale
    // widens by shifting (1023 → 65472), so a code on a pivot must land on it exactly.
    float code_scale;
    int code_depth;
    float *row[9];               // one row's reshaped I P T, then L M S, then the inputs as floats
    int row_width;
    AVBufferPool *pool;          // output planes
    size_t pool_size;
};

static const double hpe_lms_to_rgb[9] = {
     3.06441879, -2.16597676,  0.10155818,
    -0.65612108,  1.78554118, -0.12943749,
     0.01736321, -0.04725154,  1.03004253,
};

// SMPTE ST 2084 EOTF: non-linear [0, 1] to linear, 1.0 = 10 000 cd/m².
static double pq_eotf(double x) {
    const double m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128;
    const double c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32, c3 = 2392.0 / 4096 * 32;
    if (x <= 0) return 0;
    double p = pow(x, 1 / m2);
    double num = p - c1 > 0 ? p - c1 : 0;
    return pow(num / (c2 - c3 * p), 1 / m1);
}

KilnDoviMapper *kiln_dovi_mapper_new(double white_nits) {
    if (!(white_nits > 0)) return NULL;
    KilnDoviMapper *m = av_mallocz(sizeof(*m));
    if (!m) return NULL;
    m->white_nits = white_nits;
    if (!(m->pq_lut = av_malloc((PQ_LUT_SIZE + 1) * sizeof(float)))) { av_free(m); return NULL; }
    for (int i = 0; i <= PQ_LUT_SIZE; i++) m->pq_lut[i] = (float)pq_eotf((double)i / PQ_LUT_SIZE);
    return m;
}

void kiln_dovi_mapper_free(KilnDoviMapper **pm) {
    if (!pm || !*pm) return;
    KilnDoviMapper *m = *pm;
    sws_freeContext(m->sws);
    av_buffer_pool_uninit(&m->pool);   // buffers still referenced keep the pool alive
    av_free(m->pq_lut);
    for (int i = 0; i < 9; i++) av_free(m->row[i]);
    for (int c = 0; c < 3; c++) { av_free(m->planes[c]); av_free(m->curve[c].lut); }
    av_free(m->metadata);
    av_freep(pm);
}

static inline int piece_of(const Curve *c, float s) {
    int i = 0;
    while (i < c->pieces - 1 && s >= c->pivot[i + 1]) i++;
    return i;
}

static inline float clampf(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

// One component through its curve; sig holds the pixel's three original components.
static inline float reshape(const Curve *c, int comp, const float sig[3]) {
    float s = sig[comp];
    int i = piece_of(c, s);
    float out;
    if (!c->is_mmr[i]) {
        out = (c->poly[i][2] * s + c->poly[i][1]) * s + c->poly[i][0];
    } else {
        float x[7] = { sig[0], sig[1], sig[2], sig[0] * sig[1], sig[0] * sig[2], sig[1] * sig[2],
                       sig[0] * sig[1] * sig[2] };
        float p[7] = { 1, 1, 1, 1, 1, 1, 1 };
        out = c->mmr_const[i];
        for (int order = 0; order < c->mmr_order[i]; order++) {
            for (int k = 0; k < 7; k++) { p[k] *= x[k]; out += c->mmr_coef[i][order][k] * p[k]; }
        }
    }
    return clampf(out, c->pivot[0], c->pivot[c->pieces]);
}

// An MMR curve of one piece (what chroma usually has) over a row, written so the
// compiler vectorises it: every order evaluated, the unused ones with zero weights.
static void mmr_row(const Curve *c, const float *restrict f0, const float *restrict f1, const float *restrict f2,
                    float *restrict out, int width) {
    const float k = c->mmr_const[0], lo = c->pivot[0], hi = c->pivot[1];
    const float (*a)[7] = c->mmr_coef[0];
    for (int x = 0; x < width; x++) {
        float t0 = f0[x], t1 = f1[x], t2 = f2[x];
        float t3 = t0 * t1, t4 = t0 * t2, t5 = t1 * t2, t6 = t3 * t2;
        float v = k + a[0][0] * t0 + a[0][1] * t1 + a[0][2] * t2 + a[0][3] * t3 + a[0][4] * t4 + a[0][5] * t5 + a[0][6] * t6;
        float u0 = t0 * t0, u1 = t1 * t1, u2 = t2 * t2, u3 = t3 * t3, u4 = t4 * t4, u5 = t5 * t5, u6 = t6 * t6;
        v += a[1][0] * u0 + a[1][1] * u1 + a[1][2] * u2 + a[1][3] * u3 + a[1][4] * u4 + a[1][5] * u5 + a[1][6] * u6;
        v += a[2][0] * u0 * t0 + a[2][1] * u1 * t1 + a[2][2] * u2 * t2 + a[2][3] * u3 * t3 + a[2][4] * u4 * t4
           + a[2][5] * u5 * t5 + a[2][6] * u6 * t6;
        out[x] = fminf(fmaxf(v, lo), hi);
    }
}

static int build_curves(KilnDoviMapper *m, const AVDOVIMetadata *md) {
    const AVDOVIRpuDataHeader *h = av_dovi_get_header(md);
    const AVDOVIDataMapping *map = av_dovi_get_mapping(md);
    const AVDOVIColorMetadata *color = av_dovi_get_color(md);
    if (h->bl_bit_depth < 8 || h->bl_bit_depth > 16 || h->coef_log2_denom > 62) return AVERROR_INVALIDDATA;
    const double code_max = (double)((1 << h->bl_bit_depth) - 1);
    const double coef_scale = 1.0 / (double)(1ULL << h->coef_log2_denom);
    for (int comp = 0; comp < 3; comp++) {
        const AVDOVIReshapingCurve *src = &map->curves[comp];
        Curve *c = &m->curve[comp];
        if (src->num_pivots < 2 || src->num_pivots > AV_DOVI_MAX_PIECES + 1) return AVERROR_INVALIDDATA;
        c->pieces = src->num_pivots - 1;
        c->mmr = 0;
        for (int i = 0; i < src->num_pivots; i++) c->pivot[i] = (float)(src->pivots[i] / code_max);
        for (int i = 0; i < c->pieces; i++) {
            c->is_mmr[i] = src->mapping_idc[i] == AV_DOVI_MAPPING_MMR;
            if (c->is_mmr[i]) {
                if (src->mmr_order[i] < 1 || src->mmr_order[i] > 3) return AVERROR_INVALIDDATA;
                c->mmr = 1;
                c->mmr_order[i] = src->mmr_order[i];
                c->mmr_const[i] = (float)(src->mmr_constant[i] * coef_scale);
                // Orders above the piece's own are zero, so a row can evaluate all three.
                for (int o = 0; o < 3; o++)
                    for (int k = 0; k < 7; k++)
                        c->mmr_coef[i][o][k] = o < src->mmr_order[i] ? (float)(src->mmr_coef[i][o][k] * coef_scale) : 0;
            } else {
                for (int k = 0; k < 3; k++) c->poly[i][k] = k <= src->poly_order[i] ? (float)(src->poly_coef[i][k] * coef_scale) : 0;
            }
        }
        // Polynomial curves depend on their own component only: tabulate them once per
        // RPU for every 16-bit input, so a pixel costs a load instead of a search.
        if (c->mmr) {
            av_freep(&c->lut);
        } else {
            if (!c->lut && !(c->lut = av_malloc(65536 * sizeof(float)))) return AVERROR(ENOMEM);
            float sig[3] = { 0, 0, 0 };
            for (int v = 0; v < 65536; v++) { sig[comp] = fminf(v * m->code_scale, 1); c->lut[v] = reshape(c, comp, sig); }
        }
    }
    for (int i = 0; i < 9; i++) m->nonlinear[i] = (float)av_q2d(color->ycc_to_rgb_matrix[i]);
    for (int i = 0; i < 3; i++) m->offset[i] = (float)av_q2d(color->ycc_to_rgb_offset[i]);
    // RGB = HPE · rgb_to_lms · LMS, folded into one matrix, scaled so 1.0 = white_nits
    // (the cd/m² zscale's npl gives linear 1.0 in the tone-mapping graph).
    for (int r = 0; r < 3; r++)
        for (int col = 0; col < 3; col++) {
            double s = 0;
            for (int k = 0; k < 3; k++) s += hpe_lms_to_rgb[r * 3 + k] * av_q2d(color->rgb_to_lms_matrix[k * 3 + col]);
            m->linear[r * 3 + col] = (float)(s * 10000.0 / m->white_nits);
        }
    m->peak_nits = color->source_max_pq ? (float)(pq_eotf(color->source_max_pq / 4095.0) * 10000.0) : 0;
    return 0;
}

// The RPU in force for this frame: the frame's own, or the last one seen (streams may
// carry an RPU only where it changes).
static int update_metadata(KilnDoviMapper *m, const AVFrame *src) {
    const AVPixFmtDescriptor *desc = av_pix_fmt_desc_get(src->format);
    if (!desc || desc->comp[0].depth < 8 || desc->comp[0].depth > 16) return AVERROR(EINVAL);
    int depth = desc->comp[0].depth;
    if (depth != m->code_depth) {
        // The curves' tables depend on it: forget the RPU they were built for.
        m->code_depth = depth;
        m->code_scale = 1.0f / (float)(((1 << depth) - 1) << (16 - depth));
        av_freep(&m->metadata);
        m->metadata_size = 0;
    }
    const AVFrameSideData *sd = av_frame_get_side_data(src, AV_FRAME_DATA_DOVI_METADATA);
    if (!sd) return m->metadata ? 0 : AVERROR(ENODATA);
    if (m->metadata && m->metadata_size == sd->size && !memcmp(m->metadata, sd->data, sd->size)) return 0;
    uint8_t *copy = av_memdup(sd->data, sd->size);
    if (!copy) return AVERROR(ENOMEM);
    av_free(m->metadata);
    m->metadata = copy;
    m->metadata_size = sd->size;
    int err = build_curves(m, (const AVDOVIMetadata *)copy);
    if (err < 0) { av_freep(&m->metadata); m->metadata_size = 0; }
    return err;
}

static int scale_planes(KilnDoviMapper *m, const AVFrame *src, int width, int height) {
    if (!m->sws || m->src_w != src->width || m->src_h != src->height || m->src_fmt != src->format
        || m->dst_w != width || m->dst_h != height) {
        sws_freeContext(m->sws);
        // Plain YUV to YUV: libswscale changes size and depth, and touches no matrix or range.
        m->sws = sws_getContext(src->width, src->height, src->format, width, height, AV_PIX_FMT_YUV444P16,
                                SWS_BICUBIC | SWS_FULL_CHR_H_INP | SWS_ACCURATE_RND, NULL, NULL, NULL);
        if (!m->sws) return AVERROR(EINVAL);
        m->src_w = src->width; m->src_h = src->height; m->src_fmt = src->format;
        m->dst_w = width; m->dst_h = height;
    }
    size_t pixels = (size_t)width * height;
    if (pixels > m->plane_pixels) {
        for (int c = 0; c < 3; c++) {
            av_freep(&m->planes[c]);
            if (!(m->planes[c] = av_malloc(pixels * sizeof(uint16_t)))) return AVERROR(ENOMEM);
        }
        m->plane_pixels = pixels;
    }
    uint8_t *dst[4] = { (uint8_t *)m->planes[0], (uint8_t *)m->planes[1], (uint8_t *)m->planes[2], NULL };
    int stride[4] = { width * 2, width * 2, width * 2, 0 };
    int rows = sws_scale(m->sws, (const uint8_t *const *)src->data, src->linesize, 0, src->height, dst, stride);
    return rows == height ? 0 : AVERROR(EINVAL);
}

// Output planes from a pool: the filter graph keeps a reference to each picture until it
// has used it, and a pool hands the memory back afterwards instead of mapping 25 MB of
// fresh pages (and faulting them in) for every 1080p frame.
static int get_planes(KilnDoviMapper *m, AVFrame *dst) {
    int linesize = FFALIGN(dst->width * (int)sizeof(float), 64);
    size_t size = (size_t)linesize * dst->height;
    if (!m->pool || m->pool_size != size) {
        av_buffer_pool_uninit(&m->pool);
        if (!(m->pool = av_buffer_pool_init(size, NULL))) return AVERROR(ENOMEM);
        m->pool_size = size;
    }
    for (int i = 0; i < 3; i++) {
        if (!(dst->buf[i] = av_buffer_pool_get(m->pool))) return AVERROR(ENOMEM);
        dst->data[i] = dst->buf[i]->data;
        dst->linesize[i] = linesize;
    }
    return 0;
}

int kiln_dovi_map(KilnDoviMapper *m, const AVFrame *src, AVFrame *dst, int width, int height) {
    if (width < 1 || height < 1) return AVERROR(EINVAL);
    int err = update_metadata(m, src);
    if (err < 0) return err;
    if ((err = scale_planes(m, src, width, height)) < 0) return err;

    av_frame_unref(dst);
    dst->format = AV_PIX_FMT_GBRPF32LE;
    dst->width = width;
    dst->height = height;
    if ((err = get_planes(m, dst)) < 0) return err;
    if ((err = av_frame_copy_props(dst, src)) < 0) return err;
    av_frame_remove_side_data(dst, AV_FRAME_DATA_DOVI_METADATA);
    av_frame_remove_side_data(dst, AV_FRAME_DATA_DOVI_RPU_BUFFER);
    dst->color_primaries = AVCOL_PRI_BT2020;
    dst->color_trc = AVCOL_TRC_LINEAR;
    dst->colorspace = AVCOL_SPC_RGB;
    dst->color_range = AVCOL_RANGE_JPEG;
    // The tone mapper takes its peak from the mastering display; profile 5 streams
    // often carry none outside the RPU.
    if (m->peak_nits > 0 && !av_frame_get_side_data(dst, AV_FRAME_DATA_MASTERING_DISPLAY_METADATA)
        && !av_frame_get_side_data(dst, AV_FRAME_DATA_CONTENT_LIGHT_LEVEL)) {
        AVMasteringDisplayMetadata *mdm = av_mastering_display_metadata_create_side_data(dst);
        if (!mdm) return AVERROR(ENOMEM);
        mdm->max_luminance = av_d2q(m->peak_nits, 100000);
        mdm->min_luminance = av_make_q(0, 1);
        mdm->has_luminance = 1;
    }

    if (width > m->row_width) {
        for (int i = 0; i < 9; i++) {
            av_freep(&m->row[i]);
            if (!(m->row[i] = av_malloc(width * sizeof(float)))) { m->row_width = 0; return AVERROR(ENOMEM); }
        }
        m->row_width = width;
    }
    // A row at a time in stages over plain float arrays, so the compiler can vectorise the
    // matrix stages; only the table lookups stay scalar.
    const float *n = m->nonlinear, *l = m->linear, *off = m->offset, *pq = m->pq_lut;
    const float inv = m->code_scale;
    float *restrict s0 = m->row[0], *restrict s1 = m->row[1], *restrict s2 = m->row[2];
    float *restrict L = m->row[3], *restrict M = m->row[4], *restrict S = m->row[5];
    for (int y = 0; y < height; y++) {
        const uint16_t *in[3] = { m->planes[0] + (size_t)y * width, m->planes[1] + (size_t)y * width,
                                  m->planes[2] + (size_t)y * width };
        float *out[3] = { s0, s1, s2 };
        float *f[3] = { m->row[6], m->row[7], m->row[8] };
        if (m->curve[0].mmr || m->curve[1].mmr || m->curve[2].mmr)
            for (int c = 0; c < 3; c++)
                for (int x = 0; x < width; x++) f[c][x] = fminf(in[c][x] * inv, 1);
        for (int c = 0; c < 3; c++) {
            const Curve *cv = &m->curve[c];
            if (!cv->mmr) {
                const float *lut = cv->lut;
                const uint16_t *src = in[c];
                float *dst = out[c];
                for (int x = 0; x < width; x++) dst[x] = lut[src[x]];
            } else if (cv->pieces == 1) {
                mmr_row(cv, f[0], f[1], f[2], out[c], width);
            } else {
                for (int x = 0; x < width; x++) {
                    float sig[3] = { f[0][x], f[1][x], f[2][x] };
                    out[c][x] = reshape(cv, c, sig);
                }
            }
        }
        for (int x = 0; x < width; x++) {
            float a = s0[x] - off[0], b = s1[x] - off[1], c = s2[x] - off[2];
            // fmaxf first: a NaN (from a hostile RPU) becomes 0, never an index.
            L[x] = fminf(fmaxf(n[0] * a + n[1] * b + n[2] * c, 0), 1);
            M[x] = fminf(fmaxf(n[3] * a + n[4] * b + n[5] * c, 0), 1);
            S[x] = fminf(fmaxf(n[6] * a + n[7] * b + n[8] * c, 0), 1);
        }
        for (int x = 0; x < width; x++) {
            L[x] = pq[(int)(L[x] * PQ_LUT_SIZE + 0.5f)];
            M[x] = pq[(int)(M[x] * PQ_LUT_SIZE + 0.5f)];
            S[x] = pq[(int)(S[x] * PQ_LUT_SIZE + 0.5f)];
        }
        // gbrp plane order: G, B, R.
        float *restrict g = (float *)(dst->data[0] + (size_t)y * dst->linesize[0]);
        float *restrict bl = (float *)(dst->data[1] + (size_t)y * dst->linesize[1]);
        float *restrict r = (float *)(dst->data[2] + (size_t)y * dst->linesize[2]);
        for (int x = 0; x < width; x++) {
            float R = l[0] * L[x] + l[1] * M[x] + l[2] * S[x];
            float G = l[3] * L[x] + l[4] * M[x] + l[5] * S[x];
            float B = l[6] * L[x] + l[7] * M[x] + l[8] * S[x];
            r[x] = R > 0 ? R : 0;
            g[x] = G > 0 ? G : 0;
            bl[x] = B > 0 ? B : 0;
        }
    }
    return 0;
}
