// File-system calls glibc declares only under _GNU_SOURCE, which Swift's Glibc module
// does not define: FastStart.swift uses them to move an MP4's index to the front.
#define _GNU_SOURCE
#include <fcntl.h>
#include <unistd.h>
#include <errno.h>
#include <linux/falloc.h>
#include "CFFmpeg.h"

int kiln_insert_range(int fd, int64_t offset, int64_t length) {
    return fallocate(fd, FALLOC_FL_INSERT_RANGE, (off_t)offset, (off_t)length);
}

int64_t kiln_copy_file_range(int in, int64_t *in_offset, int out, int64_t *out_offset, int64_t length) {
    loff_t a = (loff_t)*in_offset, b = (loff_t)*out_offset;
    ssize_t n = copy_file_range(in, &a, out, &b, (size_t)length, 0);
    *in_offset = (int64_t)a;
    *out_offset = (int64_t)b;
    return (int64_t)n;
}

int kiln_start_writeback(int fd) {
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

#include <malloc.h>

int kiln_malloc_policy(size_t trim_above, size_t map_above) {
    return mallopt(M_TRIM_THRESHOLD, (int)trim_above) && mallopt(M_MMAP_THRESHOLD, (int)map_above)
        && mallopt(M_MXFAST, 0);
}

int kiln_malloc_release(void) {
    return malloc_trim(0);
}
