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
//
// Matroska laces several audio frames into one block, and libavformat's parser reads each
// frame's header: there only blocks without lacing (one frame each) are skimmed, as the
// block's own header says. The element whose data a direct read finishes is found in the
// bytes just read through the buffer (its ID, then a size that ends exactly where the read
// does).
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // memrchr
#endif
#include <errno.h>
#include <fcntl.h>
#include <string.h>
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
    int matroska;     // skim only blocks without lacing
    // A file read in another order (kiln_skim_reader_reorder): piece k is the bytes from
    // `virt[k]` in the order read, `real[k]` in the file; none: the file's own order.
    int64_t *virt, *real;
    int pieces;
    // Bytes read as other values (kiln_skim_reader_reorder): patch i is `patch_length[i]`
    // bytes from `patch_at[i]`, in the order read, ascending; `patch_value[i]` big-endian.
    int64_t *patch_at;
    int *patch_length;
    uint64_t *patch_value;
    int patch_count;
};

// Up to `count` bytes from `at` in the order read, into `buf`: what pread gives (0 at the end).
static ssize_t read_at(const KilnSkimReader *r, uint8_t *buf, size_t count, int64_t at) {
    if (!r->pieces) return pread(r->fd, buf, count, (off_t)at);
    int lo = 0, hi = r->pieces - 1;
    while (lo < hi) {  // the last piece beginning at or before `at`
        int mid = (lo + hi + 1) / 2;
        if (r->virt[mid] <= at) lo = mid; else hi = mid - 1;
    }
    int64_t end = lo + 1 < r->pieces ? r->virt[lo + 1] : r->size;
    if (at < r->virt[lo] || at >= end) return 0;
    if ((int64_t)count > end - at) count = (size_t)(end - at);
    ssize_t got = pread(r->fd, buf, count, (off_t)(r->real[lo] + at - r->virt[lo]));
    int first = 0, last = r->patch_count;
    while (first < last) {  // the first patch that ends past `at` (patches are at most 8 bytes)
        int mid = (first + last) / 2;
        if (r->patch_at[mid] + 8 <= at) first = mid + 1; else last = mid;
    }
    for (int i = first; got > 0 && i < r->patch_count && r->patch_at[i] < at + got; i++) {
        int n = r->patch_length[i];
        for (int k = 0; k < n; k++) {
            int64_t b = r->patch_at[i] + k - at;
            if (b >= 0 && b < got) buf[b] = (uint8_t)(r->patch_value[i] >> (8 * (n - 1 - k)));
        }
    }
    return got;
}

// The byte at file offset `at`, from the buffer libavformat just consumed (it ends at the
// reader's position: a direct read starts only once the buffer is empty, and a 4 kB
// buffer is always refilled from its start) or from the first `count` bytes of the direct
// read; -1 if it is in neither.
static int byte_at(const KilnSkimReader *r, int64_t at, const uint8_t *direct, int64_t count) {
    int64_t held = r->io->buf_end - r->io->buffer, from = r->pos - held;
    if (at >= from && at < r->pos) return r->io->buffer[at - from];
    if (at >= r->pos && at < r->pos + count) return direct[at - r->pos];
    return -1;
}

// An EBML variable-length integer at `at` (its length marker removed); -1 if unreadable.
static int64_t vint_at(const KilnSkimReader *r, int64_t at, const uint8_t *direct, int64_t count, int *length) {
    int first = byte_at(r, at, direct, count);
    if (first <= 0) return -1;
    int len = 1;
    while (!(first & (0x80 >> (len - 1)))) len++;
    int64_t value = first & (0xFF >> len);
    for (int i = 1; i < len; i++) {
        int b = byte_at(r, at + i, direct, count);
        if (b < 0) return -1;
        value = (value << 8) | b;
    }
    *length = len;
    return value;
}

// The offset of the last `byte` in the first `end` bytes of `p`, -1 if none.
static int64_t last_before(const uint8_t *p, int byte, int64_t end) {
    const uint8_t *hit = end > 0 ? memrchr(p, byte, (size_t)end) : NULL;
    return hit ? hit - p : -1;
}

// Whether the direct read of `n` bytes (its first `count` read) finishes the data of a
// SimpleBlock (0xA3) or Block (0xA1) without lacing.
static int unlaced_block(const KilnSkimReader *r, const uint8_t *direct, int64_t count, int64_t n) {
    const uint8_t *held = r->io->buffer;
    int64_t held_count = r->io->buf_end - held, from = r->pos - held_count, end = r->pos + n;
    // Nearest first: the block's header is usually just before the read, after the first
    // kilobytes of its data, which memrchr passes over many times faster than a byte loop.
    int64_t a3 = last_before(held, 0xA3, held_count), a1 = last_before(held, 0xA1, held_count);
    while (a3 >= 0 || a1 >= 0) {
        int64_t i = a3 > a1 ? a3 : a1;
        if (i == a3) a3 = last_before(held, 0xA3, i); else a1 = last_before(held, 0xA1, i);
        int64_t j = from + i;
        int size_length = 0, track_length = 0;
        int64_t size = vint_at(r, j + 1, direct, count, &size_length);
        if (size < 0 || j + 1 + size_length + size != end) continue;
        int64_t data = j + 1 + size_length;
        // The block's header: its track number, a 16-bit time, then flags (lacing in bits 1-2).
        int64_t track = vint_at(r, data, direct, count, &track_length);
        int flags = byte_at(r, data + track_length + 2, direct, count);
        return track >= 0 && flags >= 0 && !(flags & 0x06);
    }
    return 0;
}

static int skim_read(void *opaque, uint8_t *buf, int n) {
    KilnSkimReader *r = opaque;
    int want = n;
    if (r->keep > 0 && n > r->io->buffer_size && n > r->keep && r->pos + n <= r->size) want = (int)r->keep;
    int done = 0;
    for (;;) {
        ssize_t got;
        do got = read_at(r, buf + done, (size_t)(want - done), r->pos + done); while (got < 0 && errno == EINTR);
        if (got < 0) return AVERROR(errno);
        if (got == 0) {
            if (done == 0) return AVERROR_EOF;
            n = done;  // the file ends: report what was read, as the file protocol does
            break;
        }
        done += (int)got;
        if (done < want) continue;
        if (want < n && r->matroska && !unlaced_block(r, buf, done, n)) {
            want = n;  // laced frames, or not a block at all: read it all
            continue;
        }
        break;
    }
    if (done < n) r->skipped += n - done;
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

int kiln_skim_reader_reorder(KilnSkimReader *r, const int64_t *real, const int64_t *length, int count,
                             const int64_t *patch_at, const int *patch_length, const uint64_t *patch_value, int patch_count) {
    size_t patches = patch_count > 0 ? (size_t)patch_count : 1;
    r->virt = av_malloc_array(count > 0 ? count : 1, sizeof(int64_t));
    r->real = av_malloc_array(count > 0 ? count : 1, sizeof(int64_t));
    r->patch_at = av_malloc_array(patches, sizeof(int64_t));
    r->patch_length = av_malloc_array(patches, sizeof(int));
    r->patch_value = av_malloc_array(patches, sizeof(uint64_t));
    if (!r->virt || !r->real || !r->patch_at || !r->patch_length || !r->patch_value) return AVERROR(ENOMEM);
    int64_t at = 0;
    for (int k = 0; k < count; k++) {
        r->virt[k] = at;
        r->real[k] = real[k];
        at += length[k];
    }
    for (int i = 0; i < patch_count; i++) {
        r->patch_at[i] = patch_at[i];
        r->patch_length[i] = patch_length[i] < 0 ? 0 : patch_length[i] > 8 ? 8 : patch_length[i];
        r->patch_value[i] = patch_value[i];
    }
    r->patch_count = patch_count;
    r->pieces = count;
    return 0;
}

void kiln_skim_reader_keep(KilnSkimReader *r, int64_t keep) { r->keep = keep; }

void kiln_skim_reader_matroska(KilnSkimReader *r) { r->matroska = 1; }

int64_t kiln_skim_reader_skipped(const KilnSkimReader *r) { return r->skipped; }

void kiln_skim_reader_free(KilnSkimReader **pr) {
    KilnSkimReader *r = pr ? *pr : NULL;
    if (!r) return;
    av_freep(&r->virt);
    av_freep(&r->real);
    av_freep(&r->patch_at);
    av_freep(&r->patch_length);
    av_freep(&r->patch_value);
    if (r->io) av_freep(&r->io->buffer);
    avio_context_free(&r->io);
    close(r->fd);
    av_freep(pr);
}
