// Process-control calls Swift cannot import (prctl is variadic).
#ifndef KILN_CPROCESS_H
#define KILN_CPROCESS_H
#include <sys/types.h>

/// Asks the kernel to SIGKILL this process when the thread that spawned it exits, so a
/// job never outlives its daemon. Returns 0, or -1 if the parent `expected_parent` is
/// already gone (the caller should exit at once).
int kiln_die_with_parent(pid_t expected_parent);

/// Flushes standard output and says whether everything written to it arrived: 0, or the
/// errno of the write that failed (stdio keeps the error flag; Swift cannot name the
/// global `stdout` safely under strict concurrency).
int kiln_finish_stdout(void);

#endif
