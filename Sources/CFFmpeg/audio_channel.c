#include "CFFmpeg.h"
#include <string.h>

int kiln_frame_one_channel(AVFrame *dst, const AVFrame *src, int channel) {
    const int channels = src->ch_layout.nb_channels;
    if (channel < 0 || channel >= channels || src->nb_samples <= 0) return AVERROR(EINVAL);
    av_frame_unref(dst);
    // One channel is laid out alike planar or packed: the planar format names it.
    dst->format = av_get_planar_sample_fmt(src->format);
    dst->nb_samples = src->nb_samples;
    dst->sample_rate = src->sample_rate;
    av_channel_layout_default(&dst->ch_layout, 1);
    int ret = av_frame_get_buffer(dst, 0);
    if (ret >= 0) ret = av_frame_copy_props(dst, src);
    if (ret < 0) {
        av_frame_unref(dst);
        return ret;
    }
    dst->best_effort_timestamp = src->best_effort_timestamp;
    const int bytes = av_get_bytes_per_sample(src->format);
    if (av_sample_fmt_is_planar(src->format)) {
        memcpy(dst->data[0], src->extended_data[channel], (size_t)bytes * (size_t)src->nb_samples);
    } else {
        const uint8_t *in = src->data[0] + (size_t)channel * (size_t)bytes;
        uint8_t *out = dst->data[0];
        for (int i = 0; i < src->nb_samples; i++) {
            memcpy(out + (size_t)i * (size_t)bytes, in + (size_t)i * (size_t)channels * (size_t)bytes, (size_t)bytes);
        }
    }
    return 0;
}
