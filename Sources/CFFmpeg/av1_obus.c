// Whether an AV1 packet's OBUs can be walked the way libavformat's MP4 muxer walks them
// (libavformat 59, av1.c: parse_obu_header, as ff_av1_filter_obus calls it). See
// kiln_av1_obus_walk in CFFmpeg.h for why.
#include "CFFmpeg.h"

// MAX_OBU_HEADER_SIZE in av1.c: the header byte, the extension byte, and an 8-byte leb128.
enum { MAX_OBU_HEADER = 10 };

int kiln_av1_obus_walk(const uint8_t *buf, int size) {
    if (!buf || size < 0) return 0;
    while (size > 0) {
        // The muxer reads each header from at most MAX_OBU_HEADER bytes.
        int window = size < MAX_OBU_HEADER ? size : MAX_OBU_HEADER;
        uint8_t header = buf[0];
        if (header & 0x80) return 0;                       // obu_forbidden_bit
        int extension = (header >> 2) & 1, has_size = (header >> 1) & 1;
        int pos = 1 + extension;
        if (pos > window) return 0;
        int64_t obu_size = 0;
        if (has_size) {
            for (int i = 0; i < 8; i++) {                  // leb128()
                if (pos >= window) return 0;               // read past the window
                uint8_t byte = buf[pos++];
                obu_size |= (int64_t)(byte & 0x7f) << (i * 7);
                if (!(byte & 0x80)) break;
            }
        } else {
            obu_size = size - 1 - extension;
        }
        int64_t total = obu_size + pos;
        if (total > size) return 0;
        buf += total;
        size -= (int)total;
    }
    return 1;
}
