// SQLite 3 (Debian 3.40), and what Swift cannot import from it.
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a macro casting -1 to a function pointer: tells SQLite to copy a bound value.
static inline sqlite3_destructor_type kiln_sqlite_transient(void) { return SQLITE_TRANSIENT; }
