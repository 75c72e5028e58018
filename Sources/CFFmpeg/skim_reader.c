// A read-only, seekable AVIOContext over a file that can skim: read the container's
// structure and the first bytes of each packet, and skip the rest. The index forecast
// (IndexForecast.swift) needs every packet's size, time and flags, which the container's
// structure gives, and reads nothing past a packet's first bytes: skimming spares it
// most of a second read of the source.
//
// libavformat reads a packet's payload straight into the packet when it is longer than
// the context's buffer (avio_read's direct path); its own refills of the buffer (the
// structure, and short payloads) are never longer than the buffer. So a read longer than
// the buffer is a payload: once skimming is on, it gets its first `keep` bytes from the
// file and the rest of the packet is left as it was (not read, not cleared). With a small
// buffer, most of a video stream's bytes are such reads.
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "CFFmpeg.h"

struct KilnSkimReader {
    AVIOContext *io;
    int fd;
    int64_t pos;
    int64_t size;     // at opening: a payload is skimmed only where the file surely has it
    int64_t keep;     // 0: read everything
    int64_t skipped;  // bytes handed over without being read
};

static int skim_read(void *opaque, uint8_t *buf, int n) {
    KilnSkimReader *r = opaque;
    int want = n;
    if (r->keep > 0 && n > r->io->buffer_size && n > r->keep && r->pos + n <= r->size) want = (int)r->keep;
    ssize_t got;
    do got = pread(r->fd, buf, (size_t)want, (off_t)r->pos); while (got < 0 && errno == EINTR);
    if (got < 0) return AVERROR(errno);
    if (got == 0) return AVERROR_EOF;
    // A short read (the file ends) reports what it read, as the file protocol does.
    if (got < want) n = (int)got; else r->skipped += n - want;
    r->pos += n;
    return n;
}

static int64_t skim_seek(void *opaque, int64_t offset, int whence) {
    KilnSkimReader *r = opaque;
    int64_t to;
    struct stat st;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return fstat(r->fd, &st) == 0 ? (int64_t)st.st_size : AVERROR(errno);
    case SEEK_SET: to = offset; break;
    case SEEK_CUR: to = r->pos + offset; break;
    case SEEK_END:
        if (fstat(r->fd, &st) != 0) return AVERROR(errno);
        to = (int64_t)st.st_size + offset;
        break;
    default: return AVERROR(EINVAL);
    }
    if (to < 0) return AVERROR(EINVAL);
    r->pos = to;
    return to;
}

KilnSkimReader *kiln_skim_reader_open(const char *path, int buffer_size, int *error) {
    KilnSkimReader *r = av_mallocz(sizeof(*r));
    if (!r) { *error = AVERROR(ENOMEM); return NULL; }
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (r->fd < 0 || fstat(r->fd, &st) != 0) {
        *error = AVERROR(errno);
        if (r->fd >= 0) close(r->fd);
        av_free(r);
        return NULL;
    }
    r->size = (int64_t)st.st_size;
    uint8_t *buffer = av_malloc((size_t)buffer_size);
    if (buffer) r->io = avio_alloc_context(buffer, buffer_size, 0, r, skim_read, NULL, skim_seek);
    if (!r->io) {
        *error = AVERROR(ENOMEM);
        av_free(buffer);
        close(r->fd);
        av_free(r);
        return NULL;
    }
    return r;
}

AVIOContext *kiln_skim_reader_io(KilnSkimReader *r) { return r->io; }

void kiln_skim_reader_keep(KilnSkimReader *r, int64_t keep) { r->keep = keep; }

int64_t kiln_skim_reader_skipped(const KilnSkimReader *r) { return r->skipped; }

void kiln_skim_reader_free(KilnSkimReader **pr) {
    KilnSkimReader *r = pr ? *pr : NULL;
    if (!r) return;
    if (r->io) av_freep(&r->io->buffer);
    avio_context_free(&r->io);
    close(r->fd);
    av_freep(pr);
}
