#include "CFFmpeg.h"
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <math.h>
#include <errno.h>
#include <dlfcn.h>
#include <libavfilter/version.h>

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

// Only the reading thread sets the ceiling and reads the position: plain fields. The
// callback runs from inside the file protocol's reads (avio's buffer refills), where the
// context's position is that of the bytes already buffered.
struct KilnReadGuard {
    KilnInterruptFlag *flag;
    AVFormatContext *ctx;
    int64_t ceiling;
    int hit;
};

KilnReadGuard *kiln_read_guard_new(KilnInterruptFlag *flag) {
    KilnReadGuard *g = calloc(1, sizeof(*g));
    if (g) { g->flag = flag; g->ceiling = -1; }
    return g;
}
void kiln_read_guard_free(KilnReadGuard *guard) { free(guard); }
static int kiln_read_guard_callback(void *opaque) {
    KilnReadGuard *g = opaque;
    if (!g) return 0;
    if (g->flag && kiln_interrupt_flag_get(g->flag)) return 1;
    if (g->ceiling >= 0 && g->ctx && g->ctx->pb && avio_tell(g->ctx->pb) > g->ceiling) {
        g->hit = 1;
        return 1;
    }
    return 0;
}
void kiln_read_guard_install(KilnReadGuard *guard, AVFormatContext *ctx) {
    guard->ctx = ctx;
    ctx->interrupt_callback.callback = kiln_read_guard_callback;
    ctx->interrupt_callback.opaque = guard;
}
void kiln_read_guard_set_ceiling(KilnReadGuard *guard, int64_t ceiling) { guard->ceiling = ceiling; guard->hit = 0; }
int kiln_read_guard_hit(const KilnReadGuard *guard) { return guard->hit; }

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

int kiln_stream_mirrored(const AVStream *st) {
    const AVPacketSideData *sd = stream_side_data(st, AV_PKT_DATA_DISPLAYMATRIX);
    if (!sd || sd->size < 9 * 4) return 0;
    const int32_t *m = (const int32_t *)sd->data;
    // 16.16 fixed point: the products fit a double exactly enough for a sign.
    return (double)m[0] * m[4] - (double)m[1] * m[3] < 0;
}

const AVDOVIDecoderConfigurationRecord *kiln_stream_dovi(const AVStream *st) {
    const AVPacketSideData *sd = stream_side_data(st, AV_PKT_DATA_DOVI_CONF);
    if (!sd || sd->size < (int)sizeof(AVDOVIDecoderConfigurationRecord)) return NULL;
    return (const AVDOVIDecoderConfigurationRecord *)sd->data;
}

enum AVCodecID kiln_picture_codec_for_tag(unsigned int tag) {
    const struct AVCodecTag *const tables[] = { avformat_get_mov_video_tags(), avformat_get_riff_video_tags(), NULL };
    return av_codec_get_id(tables, tag);
}

int kiln_stream_has_mastering(const AVStream *st) {
    return stream_side_data(st, AV_PKT_DATA_MASTERING_DISPLAY_METADATA) != NULL ||
           stream_side_data(st, AV_PKT_DATA_CONTENT_LIGHT_LEVEL) != NULL;
}

void kiln_content_light(const AVStream *st, const AVFrame *frame, double *max_cll, double *mastering_peak) {
    *max_cll = 0;
    *mastering_peak = 0;
    // The frame's first, then the stream's for what the frame leaves at 0 (an SEI saying
    // "unknown" beside a container that knows).
    for (int from_stream = 0; from_stream < 2; from_stream++) {
        const AVContentLightMetadata *cll = NULL;
        const AVMasteringDisplayMetadata *mdm = NULL;
        if (!from_stream && frame) {
            const AVFrameSideData *sd = av_frame_get_side_data(frame, AV_FRAME_DATA_CONTENT_LIGHT_LEVEL);
            if (sd && sd->size >= sizeof(*cll)) cll = (const AVContentLightMetadata *)sd->data;
            sd = av_frame_get_side_data(frame, AV_FRAME_DATA_MASTERING_DISPLAY_METADATA);
            if (sd && sd->size >= sizeof(*mdm)) mdm = (const AVMasteringDisplayMetadata *)sd->data;
        } else if (from_stream && st) {
            const AVPacketSideData *sd = stream_side_data(st, AV_PKT_DATA_CONTENT_LIGHT_LEVEL);
            if (sd && sd->size >= (int)sizeof(*cll)) cll = (const AVContentLightMetadata *)sd->data;
            sd = stream_side_data(st, AV_PKT_DATA_MASTERING_DISPLAY_METADATA);
            if (sd && sd->size >= (int)sizeof(*mdm)) mdm = (const AVMasteringDisplayMetadata *)sd->data;
        }
        if (cll && *max_cll <= 0) *max_cll = cll->MaxCLL;
        if (mdm && *mastering_peak <= 0 && mdm->has_luminance && mdm->max_luminance.den > 0)
            *mastering_peak = av_q2d(mdm->max_luminance);
    }
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

int kiln_replace_chapters(AVFormatContext *s, int count, const int64_t *ids, const int64_t *starts,
                          const int64_t *ends, const char *const *titles) {
    AVChapter **list = count > 0 ? av_calloc(count, sizeof(*list)) : NULL;
    if (count > 0 && !list) return AVERROR(ENOMEM);
    for (int i = 0; i < count; i++) {
        AVChapter *c = av_mallocz(sizeof(*c));
        if (!c || (titles[i] && av_dict_set(&c->metadata, "title", titles[i], 0) < 0)) {
            if (c) av_dict_free(&c->metadata);
            av_free(c);
            for (int k = 0; k < i; k++) { av_dict_free(&list[k]->metadata); av_freep(&list[k]); }
            av_free(list);
            return AVERROR(ENOMEM);
        }
        c->id = ids[i];
        c->time_base = (AVRational){1, 1000000000};
        c->start = starts[i];
        c->end = ends[i];
        list[i] = c;
    }
    for (unsigned i = 0; i < s->nb_chapters; i++) {
        av_dict_free(&s->chapters[i]->metadata);
        av_freep(&s->chapters[i]);
    }
    av_freep(&s->chapters);
    s->chapters = list;
    s->nb_chapters = count;
    return 0;
}

void kiln_trim_chapters(AVFormatContext *s, int64_t end) {
    unsigned n = 0;
    for (unsigned i = 0; i < s->nb_chapters; i++) {
        AVChapter *c = s->chapters[i];
        int64_t last = av_rescale_q(end, AV_TIME_BASE_Q, c->time_base);
        if (c->start >= last) {
            av_dict_free(&c->metadata);
            av_freep(&s->chapters[i]);
            continue;
        }
        if (c->end > last) c->end = last;
        s->chapters[n++] = c;
    }
    s->nb_chapters = n;
}

int kiln_copy_stream_side_data(AVStream *out, const AVStream *in, int skip_type) {
    for (int i = 0; i < in->nb_side_data; i++) {
        const AVPacketSideData *sd = &in->side_data[i];
        if ((int)sd->type == skip_type) continue;
        uint8_t *dst = av_stream_new_side_data(out, sd->type, sd->size);
        if (!dst) return AVERROR(ENOMEM);
        memcpy(dst, sd->data, sd->size);
    }
    return 0;
}

// ---- libavfilter, loaded on first use ----
// Linking it would load it and its ~30 dependencies into every probe and remux child, which
// never build a filter graph (~12 MB of RSS and startup time each).

// The soname of the major version the headers describe: the ABI these types belong to.
static const char avfilter_soname[] = "libavfilter.so." AV_STRINGIFY(LIBAVFILTER_VERSION_MAJOR);

// The libavfilter functions Kiln calls. Each pointer's type is taken from libavfilter's own
// declaration with __typeof__, which does not reference the symbol (nothing is linked) and
// keeps the types from drifting from the headers.
struct kiln_avfilter_api {
    __typeof__(avfilter_get_by_name) *get_by_name;
    __typeof__(avfilter_graph_alloc) *graph_alloc;
    __typeof__(avfilter_graph_alloc_filter) *graph_alloc_filter;
    __typeof__(avfilter_graph_config) *graph_config;
    __typeof__(avfilter_graph_create_filter) *graph_create_filter;
    __typeof__(avfilter_graph_free) *graph_free;
    __typeof__(avfilter_graph_parse_ptr) *graph_parse_ptr;
    __typeof__(avfilter_init_str) *init_str;
    __typeof__(avfilter_inout_alloc) *inout_alloc;
    __typeof__(avfilter_inout_free) *inout_free;
    __typeof__(av_buffersrc_add_frame_flags) *buffersrc_add_frame_flags;
    __typeof__(av_buffersink_get_frame) *buffersink_get_frame;
    __typeof__(av_buffersink_get_time_base) *buffersink_get_time_base;
};

// Written once by avfilter_load under pthread_once, which makes them visible to every
// thread that passes through it; read-only afterwards.
static pthread_once_t avfilter_once = PTHREAD_ONCE_INIT;
static struct kiln_avfilter_api avfilter_api;
static int avfilter_loaded = 0;
static char avfilter_error[512];

static void avfilter_load(void) {
    void *lib = dlopen(avfilter_soname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(avfilter_error, sizeof(avfilter_error), "%s cannot be loaded: %s", avfilter_soname,
                 why ? why : "unknown error");
        return;
    }
    struct kiln_avfilter_api api;
    // POSIX guarantees that a data pointer from dlsym can be stored into a function pointer
    // this way.
    const struct { const char *name; void **slot; } symbols[] = {
        { "avfilter_get_by_name", (void **)&api.get_by_name },
        { "avfilter_graph_alloc", (void **)&api.graph_alloc },
        { "avfilter_graph_alloc_filter", (void **)&api.graph_alloc_filter },
        { "avfilter_graph_config", (void **)&api.graph_config },
        { "avfilter_graph_create_filter", (void **)&api.graph_create_filter },
        { "avfilter_graph_free", (void **)&api.graph_free },
        { "avfilter_graph_parse_ptr", (void **)&api.graph_parse_ptr },
        { "avfilter_init_str", (void **)&api.init_str },
        { "avfilter_inout_alloc", (void **)&api.inout_alloc },
        { "avfilter_inout_free", (void **)&api.inout_free },
        { "av_buffersrc_add_frame_flags", (void **)&api.buffersrc_add_frame_flags },
        { "av_buffersink_get_frame", (void **)&api.buffersink_get_frame },
        { "av_buffersink_get_time_base", (void **)&api.buffersink_get_time_base },
    };
    for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++) {
        dlerror();
        *symbols[i].slot = dlsym(lib, symbols[i].name);
        if (!*symbols[i].slot) {
            const char *why = dlerror();
            snprintf(avfilter_error, sizeof(avfilter_error), "%s cannot be loaded: %s", avfilter_soname,
                     why ? why : "a symbol is missing");
            dlclose(lib);
            return;
        }
    }
    avfilter_api = api;
    avfilter_loaded = 1;
}

/// The resolved functions, or NULL when libavfilter cannot be loaded.
static const struct kiln_avfilter_api *avfilter(void) {
    pthread_once(&avfilter_once, avfilter_load);
    return avfilter_loaded ? &avfilter_api : NULL;
}

int kiln_avfilter_available(char *error, size_t size) {
    if (avfilter()) return 1;
    if (error && size > 0) snprintf(error, size, "%s", avfilter_error);
    return 0;
}

const AVFilter *kiln_avfilter_get_by_name(const char *name) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->get_by_name(name) : NULL;
}

AVFilterGraph *kiln_avfilter_graph_alloc(void) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->graph_alloc() : NULL;
}

AVFilterContext *kiln_avfilter_graph_alloc_filter(AVFilterGraph *graph, const AVFilter *filter, const char *name) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->graph_alloc_filter(graph, filter, name) : NULL;
}

int kiln_avfilter_graph_config(AVFilterGraph *graphctx, void *log_ctx) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->graph_config(graphctx, log_ctx) : AVERROR(ENOSYS);
}

int kiln_avfilter_graph_create_filter(AVFilterContext **filt_ctx, const AVFilter *filt, const char *name,
                                      const char *args, void *opaque, AVFilterGraph *graph_ctx) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->graph_create_filter(filt_ctx, filt, name, args, opaque, graph_ctx) : AVERROR(ENOSYS);
}

void kiln_avfilter_graph_free(AVFilterGraph **graph) {
    const struct kiln_avfilter_api *api = avfilter();
    if (api) api->graph_free(graph);
}

int kiln_avfilter_graph_parse_ptr(AVFilterGraph *graph, const char *filters, AVFilterInOut **inputs,
                                  AVFilterInOut **outputs, void *log_ctx) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->graph_parse_ptr(graph, filters, inputs, outputs, log_ctx) : AVERROR(ENOSYS);
}

int kiln_avfilter_init_str(AVFilterContext *ctx, const char *args) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->init_str(ctx, args) : AVERROR(ENOSYS);
}

AVFilterInOut *kiln_avfilter_inout_alloc(void) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->inout_alloc() : NULL;
}

void kiln_avfilter_inout_free(AVFilterInOut **inout) {
    const struct kiln_avfilter_api *api = avfilter();
    if (api) api->inout_free(inout);
}

int kiln_av_buffersrc_add_frame_flags(AVFilterContext *buffer_src, AVFrame *frame, int flags) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->buffersrc_add_frame_flags(buffer_src, frame, flags) : AVERROR(ENOSYS);
}

int kiln_av_buffersink_get_frame(AVFilterContext *ctx, AVFrame *frame) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->buffersink_get_frame(ctx, frame) : AVERROR(ENOSYS);
}

AVRational kiln_av_buffersink_get_time_base(const AVFilterContext *ctx) {
    const struct kiln_avfilter_api *api = avfilter();
    return api ? api->buffersink_get_time_base(ctx) : (AVRational){ 0, 1 };
}
