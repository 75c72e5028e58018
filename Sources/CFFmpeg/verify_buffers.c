// One picture's memory for every picture a verification decoder allocates: see
// kiln_decode_into_one_picture in CFFmpeg.h for why this is safe there and nowhere else.
#include "CFFmpeg.h"

struct KilnOnePicture {
    AVFrame *picture;  // the shared memory, allocated by libavcodec's default allocator
};

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

static int one_picture_get_buffer(AVCodecContext *ctx, AVFrame *frame, int flags) {
    KilnOnePicture *one = ctx->opaque;
    AVFrame *p = one->picture;
    if (!p->buf[0] || p->width != frame->width || p->height != frame->height || p->format != frame->format) {
        av_frame_unref(p);
        p->width = frame->width;
        p->height = frame->height;
        p->format = frame->format;
        int ret = avcodec_default_get_buffer2(ctx, p, flags);
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
