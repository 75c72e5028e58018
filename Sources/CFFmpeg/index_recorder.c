// A write-only, seekable AVIOContext that keeps only what an MP4's layout depends on:
// the muxer's first bytes (ftyp, and the mdat header the muxer patches last) and everything
// written from a marked offset on (the index, written by the trailer). The media data in
// between is counted and dropped. See IndexForecast.swift for why.
#include <string.h>
#include "CFFmpeg.h"

struct KilnRecorder {
    AVIOContext *io;
    int64_t pos, size;
    int64_t origin;  // where the head kept begins
    uint8_t *head;
    int64_t head_cap;
    int64_t tail_from;  // -1 until kiln_recorder_keep_from_end
    uint8_t *tail;
    int64_t tail_len, tail_cap;
    int64_t lowest_rewrite;  // where the lowest write that went back over bytes past the head began
};

static int recorder_write(void *opaque, uint8_t *buf, int n) {
    KilnRecorder *r = opaque;
    int64_t start = r->pos, end = start + n, head_end = r->origin + r->head_cap;
    if (start < r->size && end > head_end) r->lowest_rewrite = FFMIN(r->lowest_rewrite, start);
    if (end > r->origin && start < head_end) {
        int64_t from = FFMAX(start, r->origin), to = FFMIN(end, head_end);
        memcpy(r->head + (from - r->origin), buf + (from - start), (size_t)(to - from));
    }
    if (r->tail_from >= 0 && end > r->tail_from) {
        int64_t from = FFMAX(start, r->tail_from), need = end - r->tail_from;
        if (need > r->tail_cap) {
            int64_t cap = FFMAX(need, 2 * r->tail_cap);
            uint8_t *grown = av_realloc(r->tail, (size_t)cap);
            if (!grown) return AVERROR(ENOMEM);
            r->tail = grown;
            r->tail_cap = cap;
        }
        if (from - r->tail_from > r->tail_len) memset(r->tail + r->tail_len, 0, (size_t)(from - r->tail_from - r->tail_len));
        memcpy(r->tail + (from - r->tail_from), buf + (from - start), (size_t)(end - from));
        r->tail_len = FFMAX(r->tail_len, need);
    }
    r->pos = end;
    r->size = FFMAX(r->size, end);
    return n;
}

static int64_t recorder_seek(void *opaque, int64_t offset, int whence) {
    KilnRecorder *r = opaque;
    int64_t to;
    switch (whence & ~AVSEEK_FORCE) {
    case SEEK_SET: to = offset; break;
    case SEEK_CUR: to = r->pos + offset; break;
    case SEEK_END: to = r->size + offset; break;
    case AVSEEK_SIZE: return r->size;
    default: return AVERROR(EINVAL);
    }
    if (to < 0) return AVERROR(EINVAL);
    r->pos = to;
    return to;
}

KilnRecorder *kiln_recorder_new(int64_t origin, int64_t head_bytes) {
    KilnRecorder *r = av_mallocz(sizeof(*r));
    if (!r) return NULL;
    r->origin = origin;
    r->tail_from = -1;
    r->lowest_rewrite = INT64_MAX;
    r->head_cap = head_bytes;
    r->head = av_mallocz((size_t)head_bytes);
    const int buffer_size = 1 << 15;
    uint8_t *buffer = av_malloc(buffer_size);
    if (r->head && buffer) r->io = avio_alloc_context(buffer, buffer_size, 1, r, NULL, recorder_write, recorder_seek);
    if (!r->io) {
        av_free(buffer);
        av_free(r->head);
        av_free(r);
        return NULL;
    }
    // Packets go straight to the callback instead of through the buffer (a copy saved
    // for every byte of media data, which is dropped anyway).
    r->io->direct = 1;
    return r;
}

AVIOContext *kiln_recorder_io(KilnRecorder *r) { return r->io; }

void kiln_recorder_keep_from_end(KilnRecorder *r) {
    avio_flush(r->io);
    r->tail_from = r->size;
    r->tail_len = 0;
}

int64_t kiln_recorder_size(const KilnRecorder *r) { return r->size; }

int64_t kiln_recorder_lowest_rewrite(const KilnRecorder *r) { return r->lowest_rewrite; }

const uint8_t *kiln_recorder_head(const KilnRecorder *r, int64_t *count) {
    *count = FFMAX(0, FFMIN(r->head_cap, r->size - r->origin));
    return r->head;
}

const uint8_t *kiln_recorder_tail(const KilnRecorder *r, int64_t *from, int64_t *count) {
    *from = r->tail_from;
    *count = r->tail_len;
    return r->tail;
}

void kiln_recorder_free(KilnRecorder **pr) {
    KilnRecorder *r = pr ? *pr : NULL;
    if (!r) return;
    if (r->io) av_freep(&r->io->buffer);
    avio_context_free(&r->io);
    av_free(r->head);
    av_free(r->tail);
    av_freep(pr);
}
