#include "CFFmpeg.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <math.h>

void kiln_strerror(int errnum, char *buf, size_t size) {
    if (av_strerror(errnum, buf, size) < 0) snprintf(buf, size, "error %d", errnum);
}

struct KilnInterruptFlag { atomic_int value; };

KilnInterruptFlag *kiln_interrupt_flag_new(void) {
    KilnInterruptFlag *f = calloc(1, sizeof(*f));
    if (f) atomic_init(&f->value, 0);
    return f;
}
void kiln_interrupt_flag_free(KilnInterruptFlag *flag) { free(flag); }
void kiln_interrupt_flag_set(KilnInterruptFlag *flag, int value) { atomic_store(&flag->value, value); }
int kiln_interrupt_flag_get(const KilnInterruptFlag *flag) {
    return atomic_load((atomic_int *)&((KilnInterruptFlag *)flag)->value);
}
int kiln_interrupt_callback(void *opaque) {
    return opaque ? kiln_interrupt_flag_get((const KilnInterruptFlag *)opaque) : 0;
}
void kiln_set_interrupt(AVFormatContext *ctx, KilnInterruptFlag *flag) {
    ctx->interrupt_callback.callback = kiln_interrupt_callback;
    ctx->interrupt_callback.opaque = flag;
}

// A ring of the last log lines: a failed attempt reports them, and the count of error
// lines tells how many corrupt packets a decoder concealed.
#define KILN_LOG_LINES 64
#define KILN_LOG_LINE 512
static char log_ring[KILN_LOG_LINES][KILN_LOG_LINE];
static int log_next = 0, log_used = 0, log_level = AV_LOG_WARNING, log_echo = 0;
static long log_errors = 0;
static char log_partial[KILN_LOG_LINE];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static void kiln_log_callback(void *avcl, int level, const char *fmt, va_list vl) {
    if (level > log_level) return;
    char line[KILN_LOG_LINE];
    int print_prefix = 1;
    va_list copy;
    va_copy(copy, vl);
    av_log_format_line2(avcl, level, fmt, copy, line, sizeof(line), &print_prefix);
    va_end(copy);
    pthread_mutex_lock(&log_lock);
    if (level <= AV_LOG_ERROR) log_errors++;
    size_t plen = strlen(log_partial);
    snprintf(log_partial + plen, sizeof(log_partial) - plen, "%s", line);
    size_t len = strlen(log_partial);
    if (len > 0 && (log_partial[len - 1] == '\n' || len >= sizeof(log_partial) - 1)) {
        if (log_partial[len - 1] == '\n') log_partial[len - 1] = 0;
        memcpy(log_ring[log_next], log_partial, sizeof(log_partial));
        log_next = (log_next + 1) % KILN_LOG_LINES;
        if (log_used < KILN_LOG_LINES) log_used++;
        if (log_echo) fprintf(stderr, "%s\n", log_partial);
        log_partial[0] = 0;
    }
    pthread_mutex_unlock(&log_lock);
}

void kiln_log_capture(int level, int echo) {
    pthread_mutex_lock(&log_lock);
    log_level = level;
    log_echo = echo;
    pthread_mutex_unlock(&log_lock);
    av_log_set_level(level);
    av_log_set_callback(kiln_log_callback);
}

size_t kiln_log_recent(char *buf, size_t size, int max) {
    if (size == 0) return 0;
    buf[0] = 0;
    pthread_mutex_lock(&log_lock);
    int n = log_used < max ? log_used : max;
    size_t off = 0;
    for (int i = n; i > 0; i--) {
        int idx = (log_next - i + KILN_LOG_LINES) % KILN_LOG_LINES;
        int w = snprintf(buf + off, size - off, "%s%s", log_ring[idx], i > 1 ? "\n" : "");
        if (w < 0 || (size_t)w >= size - off) { off = size - 1; break; }
        off += (size_t)w;
    }
    pthread_mutex_unlock(&log_lock);
    return off;
}

long kiln_log_error_count(void) {
    pthread_mutex_lock(&log_lock);
    long n = log_errors;
    pthread_mutex_unlock(&log_lock);
    return n;
}

void kiln_log_reset(void) {
    pthread_mutex_lock(&log_lock);
    log_errors = 0; log_used = 0; log_next = 0; log_partial[0] = 0;
    pthread_mutex_unlock(&log_lock);
}

static const AVPacketSideData *stream_side_data(const AVStream *st, enum AVPacketSideDataType type) {
    for (int i = 0; i < st->nb_side_data; i++)
        if (st->side_data[i].type == type) return &st->side_data[i];
    return NULL;
}

double kiln_stream_rotation(const AVStream *st) {
    const AVPacketSideData *sd = stream_side_data(st, AV_PKT_DATA_DISPLAYMATRIX);
    if (!sd || sd->size < 9 * 4) return NAN;
    return av_display_rotation_get((const int32_t *)sd->data);
}

const AVDOVIDecoderConfigurationRecord *kiln_stream_dovi(const AVStream *st) {
    const AVPacketSideData *sd = stream_side_data(st, AV_PKT_DATA_DOVI_CONF);
    if (!sd || sd->size < (int)sizeof(AVDOVIDecoderConfigurationRecord)) return NULL;
    return (const AVDOVIDecoderConfigurationRecord *)sd->data;
}

int kiln_stream_has_mastering(const AVStream *st) {
    return stream_side_data(st, AV_PKT_DATA_MASTERING_DISPLAY_METADATA) != NULL ||
           stream_side_data(st, AV_PKT_DATA_CONTENT_LIGHT_LEVEL) != NULL;
}

int kiln_copy_chapters(AVFormatContext *out, const AVFormatContext *in, int64_t offset) {
    if (in->nb_chapters == 0) return 0;
    AVChapter **list = av_calloc(in->nb_chapters, sizeof(*list));
    if (!list) return AVERROR(ENOMEM);
    unsigned n = 0;
    for (unsigned i = 0; i < in->nb_chapters; i++) {
        const AVChapter *src = in->chapters[i];
        int64_t shift = av_rescale_q(offset, AV_TIME_BASE_Q, src->time_base);
        int64_t start = src->start - shift, end = src->end - shift;
        if (end <= 0) continue;
        AVChapter *c = av_mallocz(sizeof(*c));
        if (!c) break;
        c->id = src->id;
        c->time_base = src->time_base;
        c->start = start < 0 ? 0 : start;
        c->end = end;
        av_dict_copy(&c->metadata, src->metadata, 0);
        list[n++] = c;
    }
    out->chapters = list;
    out->nb_chapters = n;
    return 0;
}

int kiln_copy_stream_side_data(AVStream *out, const AVStream *in) {
    for (int i = 0; i < in->nb_side_data; i++) {
        const AVPacketSideData *sd = &in->side_data[i];
        uint8_t *dst = av_stream_new_side_data(out, sd->type, sd->size);
        if (!dst) return AVERROR(ENOMEM);
        memcpy(dst, sd->data, sd->size);
    }
    return 0;
}
