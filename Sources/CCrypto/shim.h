// OpenSSL's libcrypto, for SHA-256 only: it uses the CPU's SHA extensions, an order of
// magnitude faster than portable code on the multi-gigabyte files Kiln hashes.
#include <openssl/evp.h>
#include <openssl/hmac.h>
