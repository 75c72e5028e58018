// An HEVC keyframe decoded alone as the IDR picture it could have been: see
// kiln_hevc_keyframe_as_idr in CFFmpeg.h for why, and when the answer is "as it is".
//
// Only what is needed to find where a CRA/BLA slice segment header's picture-order and
// reference-set fields are, and where the header ends, is read from the parameter sets
// (ITU-T H.265 7.3.2.2, 7.3.2.3, 7.3.6.1, 7.3.7). Anything unexpected — another slice
// type, an extension this reader does not follow, a value out of range, a header that
// does not end where the syntax says — leaves the packet as it is.
#include "CFFmpeg.h"
#include "bit_reader.h"
#include <string.h>

enum { NAL_BLA_W_LP = 16, NAL_BLA_N_LP = 18, NAL_IDR_N_LP = 20, NAL_CRA = 21, NAL_SPS = 33,
       NAL_PPS = 34, MAX_SPS = 16, MAX_PPS = 64, MAX_ST_RPS = 64 };

static int ceil_log2(uint32_t v) {
    int n = 0;
    while (((uint64_t)1 << n) < v) n++;
    return n;
}

typedef struct {
    int valid, chroma_array_type, separate_colour_plane, log2_max_poc_lsb, num_st_rps, long_term_present,
        num_lt_sps, temporal_mvp, sao, pic_size_in_ctbs;
    uint8_t num_delta_pocs[MAX_ST_RPS + 1];
} SPS;

typedef struct {
    int valid, sps_id, dependent_slices, output_flag_present, extra_bits, slice_chroma_qp_offsets, tiles,
        entropy_sync, loop_filter_across_slices, deblocking_override_enabled, deblocking_disabled,
        header_extension, chroma_qp_offset_list;
} PPS;

typedef struct {
    SPS sps[MAX_SPS];
    PPS pps[MAX_PPS];
} ParameterSets;

// Where payload byte `rbsp_index` (counted without emulation prevention) is in `src`.
static size_t escaped_offset(const uint8_t *src, size_t n, size_t rbsp_index) {
    size_t count = 0;
    int zeros = 0;
    for (size_t i = 0; i < n; i++) {
        if (zeros >= 2 && src[i] == 3) { zeros = 0; continue; }
        if (count == rbsp_index) return i;
        count++;
        zeros = src[i] == 0 ? zeros + 1 : 0;
    }
    return n;
}

static void skip_profile_tier_level(Bits *b, int max_sub_layers_minus1) {
    skip(b, 88 + 8);  // general profile space .. flags, general_level_idc
    int profile[8] = {0}, level[8] = {0};
    for (int i = 0; i < max_sub_layers_minus1; i++) {
        profile[i] = bit(b);
        level[i] = bit(b);
    }
    if (max_sub_layers_minus1 > 0) skip(b, 2 * (8 - max_sub_layers_minus1));
    for (int i = 0; i < max_sub_layers_minus1; i++) {
        if (profile[i]) skip(b, 88);
        if (level[i]) skip(b, 8);
    }
}

static void skip_scaling_list_data(Bits *b) {
    for (int size = 0; size < 4 && !b->error; size++) {
        for (int matrix = 0; matrix < 6; matrix += size == 3 ? 3 : 1) {
            if (!bit(b)) {
                ue(b);
            } else {
                int coefs = 1 << (4 + (size << 1));
                if (coefs > 64) coefs = 64;
                if (size > 1) se(b);
                for (int i = 0; i < coefs && !b->error; i++) se(b);
            }
        }
    }
}

// st_ref_pic_set(idx): `num_delta_pocs` holds the sets before it (the SPS's), and gets its own.
static int st_ref_pic_set(Bits *b, int idx, int num_sets, uint8_t *num_delta_pocs) {
    if (idx != 0 && bit(b)) {  // predicted from an earlier set
        uint32_t delta_idx = 1;
        if (idx == num_sets) delta_idx = ue(b) + 1;
        if (delta_idx > (uint32_t)idx) return -1;
        bit(b);  // delta_rps_sign
        ue(b);   // abs_delta_rps_minus1
        int ref = idx - (int)delta_idx, n = 0;
        for (int j = 0; j <= num_delta_pocs[ref] && !b->error; j++) {
            int used = bit(b), use_delta = used ? 1 : bit(b);
            if (used || use_delta) n++;
        }
        if (n > 32) return -1;
        num_delta_pocs[idx] = (uint8_t)n;
    } else {
        uint32_t negative = ue(b), positive = ue(b);
        if (negative > 16 || positive > 16) return -1;
        for (uint32_t i = 0; i < negative + positive && !b->error; i++) {
            ue(b);   // delta_poc_minus1
            bit(b);  // used_by_curr_pic
        }
        num_delta_pocs[idx] = (uint8_t)(negative + positive);
    }
    return b->error ? -1 : 0;
}

static void parse_sps(Bits *b, ParameterSets *sets) {
    SPS s;
    memset(&s, 0, sizeof(s));
    skip(b, 4);  // sps_video_parameter_set_id
    int max_sub_layers_minus1 = bits(b, 3);
    skip(b, 1);
    skip_profile_tier_level(b, max_sub_layers_minus1);
    uint32_t id = ue(b);
    uint32_t chroma_format_idc = ue(b);
    if (id >= MAX_SPS || chroma_format_idc > 3) return;
    if (chroma_format_idc == 3) s.separate_colour_plane = bit(b);
    s.chroma_array_type = s.separate_colour_plane ? 0 : (int)chroma_format_idc;
    uint32_t width = ue(b), height = ue(b);
    if (bit(b)) { ue(b); ue(b); ue(b); ue(b); }  // conformance window
    ue(b); ue(b);  // bit depths
    uint32_t log2_max_poc_lsb = ue(b) + 4;
    if (log2_max_poc_lsb > 16) return;
    s.log2_max_poc_lsb = (int)log2_max_poc_lsb;
    int ordering_for_all = bit(b);
    for (int i = ordering_for_all ? 0 : max_sub_layers_minus1; i <= max_sub_layers_minus1; i++) { ue(b); ue(b); ue(b); }
    uint32_t log2_min_cb = ue(b) + 3, log2_ctb = log2_min_cb + ue(b);
    if (log2_ctb < 4 || log2_ctb > 6 || width == 0 || height == 0 || width > 16888 || height > 16888) return;
    uint32_t ctb = 1u << log2_ctb;
    s.pic_size_in_ctbs = (int)(((width + ctb - 1) / ctb) * ((height + ctb - 1) / ctb));
    ue(b); ue(b); ue(b); ue(b);  // transform block sizes and hierarchy depths
    if (bit(b) && bit(b)) skip_scaling_list_data(b);
    bit(b);  // amp
    s.sao = bit(b);
    if (bit(b)) { skip(b, 8); ue(b); ue(b); bit(b); }  // PCM
    uint32_t num_sets = ue(b);
    if (num_sets > MAX_ST_RPS) return;
    s.num_st_rps = (int)num_sets;
    for (int i = 0; i < (int)num_sets; i++) {
        if (st_ref_pic_set(b, i, (int)num_sets, s.num_delta_pocs) < 0) return;
    }
    s.long_term_present = bit(b);
    if (s.long_term_present) {
        uint32_t n = ue(b);
        if (n > 32) return;
        s.num_lt_sps = (int)n;
        for (uint32_t i = 0; i < n; i++) skip(b, s.log2_max_poc_lsb + 1);
    }
    s.temporal_mvp = bit(b);
    if (b->error) return;
    s.valid = 1;
    sets->sps[id] = s;
}

static void parse_pps(Bits *b, ParameterSets *sets) {
    PPS p;
    memset(&p, 0, sizeof(p));
    uint32_t id = ue(b), sps_id = ue(b);
    if (id >= MAX_PPS || sps_id >= MAX_SPS) return;
    p.sps_id = (int)sps_id;
    p.dependent_slices = bit(b);
    p.output_flag_present = bit(b);
    p.extra_bits = bits(b, 3);
    bit(b); bit(b);  // sign data hiding, cabac_init_present
    ue(b); ue(b);    // default reference counts
    se(b);           // init_qp
    bit(b);          // constrained intra
    int transform_skip = bit(b);
    if (bit(b)) ue(b);  // cu_qp_delta
    se(b); se(b);       // cb, cr qp offsets
    p.slice_chroma_qp_offsets = bit(b);
    bit(b); bit(b); bit(b);  // weighted pred, bipred, transquant bypass
    p.tiles = bit(b);
    p.entropy_sync = bit(b);
    if (p.tiles) {
        uint32_t columns = ue(b), rows = ue(b);
        if (columns > 64 || rows > 64) return;
        if (!bit(b)) {
            for (uint32_t i = 0; i < columns; i++) ue(b);
            for (uint32_t i = 0; i < rows; i++) ue(b);
        }
        bit(b);
    }
    p.loop_filter_across_slices = bit(b);
    if (bit(b)) {  // deblocking control
        p.deblocking_override_enabled = bit(b);
        p.deblocking_disabled = bit(b);
        if (!p.deblocking_disabled) { se(b); se(b); }
    }
    if (bit(b)) skip_scaling_list_data(b);
    bit(b);  // lists_modification_present
    ue(b);   // log2_parallel_merge_level
    p.header_extension = bit(b);
    if (bit(b)) {  // extensions
        int range = bit(b), multilayer = bit(b), three_d = bit(b), scc = bit(b);
        skip(b, 4);
        // Multilayer, 3D and screen content add slice header fields this reader does not follow.
        if (multilayer || three_d || scc) return;
        if (range) {
            if (transform_skip) ue(b);
            bit(b);  // cross-component prediction
            p.chroma_qp_offset_list = bit(b);
        }
    }
    if (b->error) return;
    p.valid = 1;
    sets->pps[id] = p;
}

static void parse_parameter_set(const uint8_t *nal, size_t n, ParameterSets *sets) {
    if (n < 3) return;
    int type = (nal[0] >> 1) & 0x3f, layer = ((nal[0] & 1) << 5) | (nal[1] >> 3);
    // Another layer's parameter sets may reuse the base layer's ids.
    if ((type != NAL_SPS && type != NAL_PPS) || layer != 0) return;
    uint8_t *rbsp = av_malloc(n);
    if (!rbsp) return;
    size_t len = unescape(nal + 2, n - 2, rbsp);
    Bits b = { rbsp, len * 8, 0, 0 };
    if (type == NAL_SPS) parse_sps(&b, sets); else parse_pps(&b, sets);
    av_free(rbsp);
}

typedef struct {
    uint8_t *data;
    size_t size, capacity;
    int bit_count;  // bits used in the last byte (0: it is full or there is none)
} Writer;

static int put_bit(Writer *w, unsigned v) {
    if (w->bit_count == 0) {
        if (w->size == w->capacity) return -1;
        w->data[w->size++] = 0;
    }
    if (v) w->data[w->size - 1] |= (uint8_t)(0x80 >> w->bit_count);
    w->bit_count = (w->bit_count + 1) & 7;
    return 0;
}

static int copy_bits(Writer *w, const Bits *from, size_t start, size_t end) {
    Bits b = *from;
    b.pos = start;
    for (size_t i = start; i < end; i++) {
        if (put_bit(w, bit(&b)) < 0) return -1;
    }
    return 0;
}

// One CRA/BLA slice segment NAL unit rewritten as IDR_N_LP into `out` (room for `cap`
// bytes); returns its size, or 0 where it cannot be.
static size_t slice_as_idr(const uint8_t *nal, size_t n, const ParameterSets *sets, uint8_t *out, size_t cap) {
    if (n < 4) return 0;
    size_t written = 0;
    uint8_t *rbsp = av_malloc(n), *header = av_malloc(n + 16);
    if (!rbsp || !header) goto done;
    size_t len = unescape(nal + 2, n - 2, rbsp);
    Bits b = { rbsp, len * 8, 0, 0 };
    int first = bit(&b);
    bit(&b);  // no_output_of_prior_pics_flag: IRAP, and IDR, pictures have it
    uint32_t pps_id = ue(&b);
    if (pps_id >= MAX_PPS || !sets->pps[pps_id].valid) goto done;
    const PPS *p = &sets->pps[pps_id];
    const SPS *s = &sets->sps[p->sps_id];
    if (!s->valid) goto done;
    int dependent = 0;
    if (!first) {
        if (p->dependent_slices) dependent = bit(&b);
        skip(&b, ceil_log2((uint32_t)s->pic_size_in_ctbs));
    }
    size_t cut_from = b.pos, cut_to = b.pos;
    if (!dependent) {
        skip(&b, p->extra_bits);
        if (ue(&b) != 2) goto done;  // an IRAP picture's slices are intra (I = 2)
        if (p->output_flag_present) bit(&b);
        if (s->separate_colour_plane) skip(&b, 2);
        // What an IDR picture's header does not have: its order count and reference sets.
        cut_from = b.pos;
        skip(&b, s->log2_max_poc_lsb);
        if (!bit(&b)) {
            uint8_t counts[MAX_ST_RPS + 1];
            memcpy(counts, s->num_delta_pocs, sizeof(counts));
            if (st_ref_pic_set(&b, s->num_st_rps, s->num_st_rps, counts) < 0) goto done;
        } else if (s->num_st_rps > 1) {
            skip(&b, ceil_log2((uint32_t)s->num_st_rps));
        }
        if (s->long_term_present) {
            uint32_t from_sps = s->num_lt_sps > 0 ? ue(&b) : 0, own = ue(&b);
            if (from_sps > (uint32_t)s->num_lt_sps || own > 32) goto done;
            for (uint32_t i = 0; i < from_sps + own && !b.error; i++) {
                if (i < from_sps) {
                    if (s->num_lt_sps > 1) skip(&b, ceil_log2((uint32_t)s->num_lt_sps));
                } else {
                    skip(&b, s->log2_max_poc_lsb + 1);
                }
                if (bit(&b)) ue(&b);  // delta_poc_msb_cycle_lt
            }
        }
        if (s->temporal_mvp) bit(&b);
        cut_to = b.pos;
        int sao_luma = 0, sao_chroma = 0;
        if (s->sao) {
            sao_luma = bit(&b);
            if (s->chroma_array_type != 0) sao_chroma = bit(&b);
        }
        se(&b);  // slice_qp_delta
        if (p->slice_chroma_qp_offsets) { se(&b); se(&b); }
        if (p->chroma_qp_offset_list) bit(&b);
        int override = p->deblocking_override_enabled ? bit(&b) : 0;
        int deblocking_disabled = p->deblocking_disabled;
        if (override) {
            deblocking_disabled = bit(&b);
            if (!deblocking_disabled) { se(&b); se(&b); }
        }
        if (p->loop_filter_across_slices && (sao_luma || sao_chroma || !deblocking_disabled)) bit(&b);
    }
    if (p->tiles || p->entropy_sync) {
        uint32_t entries = ue(&b);
        if (entries > 4400) goto done;
        if (entries > 0) {
            uint32_t length = ue(&b) + 1;
            if (length > 32) goto done;
            skip(&b, (size_t)entries * length);
        }
    }
    if (p->header_extension) skip(&b, (size_t)ue(&b) * 8);
    size_t header_end = b.pos;
    // byte_alignment(): a one, then zeros to the byte's end.
    if (!bit(&b)) goto done;
    while (b.pos & 7) {
        if (bit(&b)) goto done;
    }
    if (b.error) goto done;
    size_t data = b.pos / 8;  // the slice data, in payload bytes without emulation prevention

    Writer w = { header, 0, n + 16, 0 };
    if (copy_bits(&w, &b, 0, cut_from) < 0 || copy_bits(&w, &b, cut_to, header_end) < 0 || put_bit(&w, 1) < 0) goto done;
    while (w.bit_count != 0) {
        if (put_bit(&w, 0) < 0) goto done;
    }
    // The header's last byte holds the alignment's one, so it is never zero: neither the
    // rewritten header nor the original slice data after it needs an emulation
    // prevention byte where they meet, and the data (which entry points count in, with
    // its emulation prevention bytes) goes on unchanged.
    if (cap < 2) goto done;
    out[0] = (uint8_t)((nal[0] & 0x81) | (NAL_IDR_N_LP << 1));
    out[1] = nal[1];
    size_t o = 2;
    int zeros = 0;
    for (size_t i = 0; i < w.size; i++) {
        if (o + 2 > cap) goto done;
        if (zeros >= 2 && header[i] <= 3) { out[o++] = 3; zeros = 0; }
        out[o++] = header[i];
        zeros = header[i] == 0 ? zeros + 1 : 0;
    }
    size_t tail = 2 + escaped_offset(nal + 2, n - 2, data);
    if (tail > n || o + (n - tail) > cap) goto done;
    memcpy(out + o, nal + tail, n - tail);
    written = o + (n - tail);
done:
    av_free(rbsp);
    av_free(header);
    return written;
}

// A CRA or BLA slice of the base layer (libavcodec decodes no other layer).
static int is_irap_slice(const uint8_t *nal) {
    int type = (nal[0] >> 1) & 0x3f, layer = ((nal[0] & 1) << 5) | (nal[1] >> 3);
    return layer == 0 && ((type >= NAL_BLA_W_LP && type <= NAL_BLA_N_LP) || type == NAL_CRA);
}

static uint64_t read_length(const uint8_t *p, int size) {
    uint64_t v = 0;
    for (int i = 0; i < size; i++) v = (v << 8) | p[i];
    return v;
}

int kiln_hevc_keyframe_as_idr(const uint8_t *hvcc, int hvcc_size, const AVPacket *in, AVPacket *out) {
    // hvcC: its length size, then arrays of parameter sets.
    if (!hvcc || hvcc_size < 23 || hvcc[0] != 1 || !in || !in->data) return 0;
    int length_size = (hvcc[21] & 3) + 1;
    if (length_size == 3) return 0;
    ParameterSets *sets = av_mallocz(sizeof(*sets));
    if (!sets) return AVERROR(ENOMEM);
    int result = 0;
    size_t at = 23;
    for (int a = 0; a < hvcc[22] && at + 3 <= (size_t)hvcc_size; a++) {
        int count = (hvcc[at + 1] << 8) | hvcc[at + 2];
        at += 3;
        for (int i = 0; i < count && at + 2 <= (size_t)hvcc_size; i++) {
            size_t len = (size_t)((hvcc[at] << 8) | hvcc[at + 1]);
            at += 2;
            if (at + len > (size_t)hvcc_size) break;
            parse_parameter_set(hvcc + at, len, sets);
            at += len;
        }
    }
    // In-band parameter sets come before the slices that use them and replace the record's.
    const uint8_t *d = in->data;
    size_t size = (size_t)in->size, pos = 0;
    int irap_slices = 0;
    while (pos + (size_t)length_size <= size) {
        uint64_t len = read_length(d + pos, length_size);
        pos += (size_t)length_size;
        if (len < 2 || len > size - pos) { irap_slices = 0; break; }
        parse_parameter_set(d + pos, (size_t)len, sets);  // SPS and PPS; other units pass
        if (is_irap_slice(d + pos)) irap_slices++;
        pos += (size_t)len;
    }
    if (irap_slices == 0 || pos != size) goto done;
    // A rewritten header is shorter, but its emulation prevention bytes fall elsewhere: room
    // for a few more per slice (a slice that needs more is not rewritten).
    size_t capacity = size + (size_t)irap_slices * 16;
    if (capacity > INT32_MAX - AV_INPUT_BUFFER_PADDING_SIZE) goto done;
    AVPacket *made = av_packet_alloc();
    if (!made || av_new_packet(made, (int)capacity) < 0) {
        av_packet_free(&made);
        result = AVERROR(ENOMEM);
        goto done;
    }
    size_t o = 0;
    pos = 0;
    while (pos < size) {
        size_t len = (size_t)read_length(d + pos, length_size);
        pos += (size_t)length_size;
        const uint8_t *nal = d + pos;
        size_t wrote = 0;
        if (o + (size_t)length_size > capacity) { av_packet_free(&made); goto done; }
        size_t room = capacity - o - (size_t)length_size;
        if (is_irap_slice(nal)) {
            wrote = slice_as_idr(nal, len, sets, made->data + o + length_size, room);
            if (wrote == 0 || (length_size < 4 && wrote >> (8 * length_size))) { av_packet_free(&made); goto done; }
        } else {
            if (len > room) { av_packet_free(&made); goto done; }
            memcpy(made->data + o + length_size, nal, len);
            wrote = len;
        }
        for (int i = 0; i < length_size; i++) made->data[o + i] = (uint8_t)(wrote >> (8 * (length_size - 1 - i)));
        o += (size_t)length_size + wrote;
        pos += len;
    }
    made->size = (int)o;
    memset(made->data + o, 0, AV_INPUT_BUFFER_PADDING_SIZE);
    if (av_packet_copy_props(made, in) < 0) {
        av_packet_free(&made);
        result = AVERROR(ENOMEM);
        goto done;
    }
    av_packet_unref(out);
    av_packet_move_ref(out, made);
    av_packet_free(&made);
    result = 1;
done:
    av_free(sets);
    return result;
}
