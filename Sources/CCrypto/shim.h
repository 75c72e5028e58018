// OpenSSL's libcrypto, for SHA-256 only: it uses the CPU's SHA extensions, an order of
// magnitude faster than portable code on the multi-gigabyte files Kiln hashes.
// SHA256_Init/Update/Final (deprecated in OpenSSL 3, still shipped) run the same code as
// EVP_sha256 without starting OpenSSL 3's provider machinery, which costs 2 MB of
// resident memory in every process that hashes.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
