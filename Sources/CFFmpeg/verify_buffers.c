// One picture's memory for every picture a verification decoder allocates: see
// kiln_decode_into_one_picture in CFFmpeg.h for why this is safe there and nowhere else.
#include "CFFmpeg.h"

struct KilnOnePicture {
    AVFrame *picture;  // the shared memory, allocated by libavcodec's default allocator
    int requests;      // pictures the decoder asked for
};

int kiln_one_picture_requests(const KilnOnePicture *one) { return one ? one->requests : 0; }

KilnOnePicture *kiln_one_picture_new(void) {
    KilnOnePicture *one = av_mallocz(sizeof(*one));
    if (!one) return NULL;
    one->picture = av_frame_alloc();
    if (!one->picture) { av_free(one); return NULL; }
    return one;
}

void kiln_one_picture_free(KilnOnePicture **one) {
    if (!one || !*one) return;
    av_frame_free(&(*one)->picture);  // frames still holding the buffers keep them alive
    av_freep(one);
}

// H.264 and HEVC: every row of a plane is the same row (linesize 0), so a UHD 10-bit
// picture takes 24 KB instead of 25 MB. Their syntax (CAVLC/CABAC) never depends on pixel
// values, and an intra picture's reconstruction only reads neighbours inside the picture,
// so every error the decoder can report is still reported; only the pixels, which nobody
// reads, come out wrong. Other decoders get a whole picture.
static int one_row_per_plane(AVFrame *p) {
    int linesizes[4];
    // Room for the widest a decoder writes: the width rounded up to a 64-pixel block, and more.
    int ret = av_image_fill_linesizes(linesizes, p->format, FFALIGN(p->width, 64) + 64);
    if (ret < 0) return ret;
    int total = 0;
    for (int i = 0; i < 4; i++) total += FFALIGN(linesizes[i], 64);
    p->buf[0] = av_buffer_allocz(total + AV_INPUT_BUFFER_PADDING_SIZE);
    if (!p->buf[0]) return AVERROR(ENOMEM);
    uint8_t *at = p->buf[0]->data;
    for (int i = 0; i < 4 && linesizes[i] > 0; i++) {
        p->data[i] = at;
        p->linesize[i] = 0;
        at += FFALIGN(linesizes[i], 64);
    }
    return 0;
}

static int one_picture_get_buffer(AVCodecContext *ctx, AVFrame *frame, int flags) {
    KilnOnePicture *one = ctx->opaque;
    AVFrame *p = one->picture;
    one->requests++;
    if (!p->buf[0] || p->width != frame->width || p->height != frame->height || p->format != frame->format) {
        av_frame_unref(p);
        p->width = frame->width;
        p->height = frame->height;
        p->format = frame->format;
        int ret = ctx->codec_id == AV_CODEC_ID_H264 || ctx->codec_id == AV_CODEC_ID_HEVC
            ? one_row_per_plane(p) : avcodec_default_get_buffer2(ctx, p, flags);
        if (ret < 0) return ret;
    }
    for (int i = 0; i < AV_NUM_DATA_POINTERS; i++) {
        frame->data[i] = p->data[i];
        frame->linesize[i] = p->linesize[i];
        if (p->buf[i] && !(frame->buf[i] = av_buffer_ref(p->buf[i]))) {
            for (int j = 0; j < i; j++) av_buffer_unref(&frame->buf[j]);
            return AVERROR(ENOMEM);
        }
    }
    frame->extended_data = frame->data;
    return 0;
}

void kiln_decode_into_one_picture(AVCodecContext *ctx, KilnOnePicture *one) {
    if (ctx->codec_type != AVMEDIA_TYPE_VIDEO || !one) return;
    ctx->opaque = one;
    ctx->get_buffer2 = one_picture_get_buffer;
}
