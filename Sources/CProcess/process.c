#include "CProcess.h"
#include <sys/prctl.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <errno.h>

int kiln_die_with_parent(pid_t expected_parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return -1;
    // The parent may have died between fork and prctl: then we were re-parented already.
    if (expected_parent > 0 && getppid() != expected_parent) return -1;
    return 0;
}

int kiln_finish_stdout(void) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
    return errno != 0 ? errno : EIO;
}
