// What libavcodec's H.264 decoder would report after its first picture, read from the
// sequence parameter set in an avcC record instead: see kiln_h264_parameters in
// CFFmpeg.h for why. ITU-T H.264 7.3.2.1.1 (SPS), E.1.1 (VUI), E.1.2 (HRD); the values
// follow libavcodec 59 (h264_ps.c, h264_slice.c: get_pixel_format, h264_init_ps). Any
// case this reader does not vouch for answers 0, and the caller lets the decoder say.
#include "CFFmpeg.h"
#include "bit_reader.h"
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <stdlib.h>
#include <string.h>

enum { NAL_SPS = 7, EXTENDED_SAR = 255 };

// Table E-1: sample aspect ratios by aspect_ratio_idc (0 is "unspecified").
static const AVRational pixel_aspect[17] = {
    {0, 1}, {1, 1}, {12, 11}, {10, 11}, {16, 11}, {40, 33}, {24, 11}, {20, 11}, {32, 11},
    {80, 33}, {18, 11}, {15, 11}, {64, 33}, {160, 99}, {4, 3}, {3, 2}, {2, 1},
};

static int skip_scaling_list(Bits *b, int size) {
    int last = 8, next = 8;
    for (int j = 0; j < size && !b->error; j++) {
        if (next != 0) {
            int32_t delta = se(b);
            if (delta < -128 || delta > 127) return -1;
            next = (last + delta + 256) % 256;
        }
        last = next == 0 ? last : next;
    }
    return b->error ? -1 : 0;
}

static int skip_hrd(Bits *b) {
    uint32_t cpb_count = ue(b) + 1;
    if (cpb_count > 32) return -1;
    skip(b, 8);  // bit_rate_scale, cpb_size_scale
    for (uint32_t i = 0; i < cpb_count && !b->error; i++) {
        ue(b);   // bit_rate_value_minus1
        ue(b);   // cpb_size_value_minus1
        bit(b);  // cbr_flag
    }
    skip(b, 20);  // four delay and offset lengths
    return b->error ? -1 : 0;
}

// Whether an SPS of this profile_idc says its chroma format, depths and scaling lists
// (7.3.2.1.1): the High profiles and their scalable and multiview kin.
static int names_chroma_format(int profile) {
    switch (profile) {
    case 100: case 110: case 122: case 244: case 44: case 83: case 86: case 118: case 128:
    case 138: case 139: case 134: case 135: return 1;
    default: return 0;
    }
}

// The pixel format get_pixel_format picks (software decoding) for the depths and chroma
// formats this reader vouches for.
static int pixel_format(int depth, int chroma_format_idc, int colorspace, int range) {
    int rgb = colorspace == AVCOL_SPC_RGB, full = range == AVCOL_RANGE_JPEG;
    if (depth == 8) {
        switch (chroma_format_idc) {
        case 3: return rgb ? AV_PIX_FMT_GBRP : full ? AV_PIX_FMT_YUVJ444P : AV_PIX_FMT_YUV444P;
        case 2: return full ? AV_PIX_FMT_YUVJ422P : AV_PIX_FMT_YUV422P;
        default: return full ? AV_PIX_FMT_YUVJ420P : AV_PIX_FMT_YUV420P;
        }
    }
    switch (chroma_format_idc) {
    case 3: return rgb ? AV_PIX_FMT_GBRP10 : AV_PIX_FMT_YUV444P10;
    case 2: return AV_PIX_FMT_YUV422P10;
    default: return AV_PIX_FMT_YUV420P10;
    }
}

static int describe(Bits *b, const AVCodecParameters *par, KilnH264Parameters *out) {
    int profile = (int)bits(b, 8);
    skip(b, 16);  // constraint flags, reserved bits, level_idc
    if (ue(b) > 31) return 0;  // seq_parameter_set_id
    uint32_t chroma_format_idc = 1, depth = 8, depth_chroma = 8;
    if (names_chroma_format(profile)) {
        chroma_format_idc = ue(b);
        if (chroma_format_idc > 3) return 0;
        if (chroma_format_idc == 3 && bit(b)) return 0;  // separate colour planes
        depth = ue(b) + 8;
        depth_chroma = ue(b) + 8;
        bit(b);  // qpprime_y_zero_transform_bypass_flag
        if (bit(b)) {  // seq_scaling_matrix_present_flag
            for (int i = 0; i < (chroma_format_idc != 3 ? 8 : 12); i++) {
                if (bit(b) && skip_scaling_list(b, i < 6 ? 16 : 64) < 0) return 0;
            }
        }
    }
    // Monochrome and the depths libx264 cannot make (so no test covers) are left to the
    // decoder, as are mixed luma and chroma depths, which it refuses.
    if (chroma_format_idc == 0 || depth != depth_chroma || (depth != 8 && depth != 10)) return 0;
    if (ue(b) > 12) return 0;  // log2_max_frame_num_minus4
    uint32_t poc_type = ue(b);
    if (poc_type == 0) {
        if (ue(b) > 12) return 0;  // log2_max_pic_order_cnt_lsb_minus4
    } else if (poc_type == 1) {
        bit(b);  // delta_pic_order_always_zero_flag
        se(b);   // offset_for_non_ref_pic
        se(b);   // offset_for_top_to_bottom_field
        uint32_t cycle = ue(b);
        if (cycle > 255) return 0;
        for (uint32_t i = 0; i < cycle && !b->error; i++) se(b);
    } else if (poc_type != 2) {
        return 0;
    }
    if (ue(b) > 16) return 0;  // max_num_ref_frames
    bit(b);  // gaps_in_frame_num_value_allowed_flag
    uint32_t mb_width = ue(b) + 1, map_height = ue(b) + 1;
    int frame_mbs_only = (int)bit(b);
    if (!frame_mbs_only) bit(b);  // mb_adaptive_frame_field_flag
    bit(b);  // direct_8x8_inference_flag
    uint32_t crop_left = 0, crop_right = 0, crop_top = 0, crop_bottom = 0;
    if (bit(b)) {
        crop_left = ue(b); crop_right = ue(b); crop_top = ue(b); crop_bottom = ue(b);
    }
    if (mb_width > 1024 || map_height > 1024 || b->error) return 0;
    // libavcodec moves a left crop to keep rows aligned; encoders crop right and bottom.
    if (crop_left != 0 || crop_top != 0 || crop_right > 64 || crop_bottom > 64) return 0;
    int step_x = chroma_format_idc == 3 ? 1 : 2;
    int step_y = (2 - frame_mbs_only) * (chroma_format_idc == 1 ? 2 : 1);
    int width = 16 * (int)mb_width - (int)crop_right * step_x;
    int height = 16 * (int)map_height * (2 - frame_mbs_only) - (int)crop_bottom * step_y;
    // The container's size is the one libavformat keeps when nothing is decoded.
    if (width != par->width || height != par->height) return 0;

    if (!bit(b)) return 0;  // vui_parameters_present_flag: the reorder depth is only there
    AVRational sar = {0, 1};
    if (bit(b)) {  // aspect_ratio_info_present_flag
        uint32_t idc = bits(b, 8);
        if (idc == EXTENDED_SAR) {
            sar.num = (int)bits(b, 16);
            sar.den = (int)bits(b, 16);
        } else if (idc < 17) {
            sar = pixel_aspect[idc];
        } else {
            return 0;
        }
    }
    if (bit(b)) bit(b);  // overscan_info_present_flag, overscan_appropriate_flag
    int range = par->color_range, primaries = par->color_primaries, trc = par->color_trc,
        colorspace = par->color_space;
    if (bit(b)) {  // video_signal_type_present_flag
        skip(b, 3);  // video_format
        range = bit(b) ? AVCOL_RANGE_JPEG : AVCOL_RANGE_MPEG;
        if (bit(b)) {  // colour_description_present_flag
            primaries = (int)bits(b, 8);
            trc = (int)bits(b, 8);
            colorspace = (int)bits(b, 8);
            if (!av_color_primaries_name(primaries)) primaries = AVCOL_PRI_UNSPECIFIED;
            if (!av_color_transfer_name(trc)) trc = AVCOL_TRC_UNSPECIFIED;
            if (!av_color_space_name(colorspace)) colorspace = AVCOL_SPC_UNSPECIFIED;
        }
    }
    // Wide-gamut and HDR streams may carry an alternative transfer characteristics SEI
    // (HLG) that only the decoder reads: let it.
    if (primaries == AVCOL_PRI_BT2020 || trc == AVCOL_TRC_BT2020_10 || trc == AVCOL_TRC_BT2020_12 ||
        trc == AVCOL_TRC_SMPTE2084 || trc == AVCOL_TRC_ARIB_STD_B67) return 0;
    int chroma_location = AVCHROMA_LOC_LEFT;
    if (bit(b)) {  // chroma_loc_info_present_flag
        uint32_t top = ue(b);
        ue(b);  // chroma_sample_loc_type_bottom_field
        chroma_location = top <= 5 ? (int)top + 1 : AVCHROMA_LOC_UNSPECIFIED;
    }
    if (bit(b)) {  // timing_info_present_flag
        uint32_t units = bits(b, 32), scale = bits(b, 32);
        if (units == 0 || scale == 0) return 0;
        bit(b);  // fixed_frame_rate_flag
    }
    int nal_hrd = (int)bit(b);
    if (nal_hrd && skip_hrd(b) < 0) return 0;
    int vcl_hrd = (int)bit(b);
    if (vcl_hrd && skip_hrd(b) < 0) return 0;
    if (nal_hrd || vcl_hrd) bit(b);  // low_delay_hrd_flag
    bit(b);  // pic_struct_present_flag
    if (!bit(b)) return 0;  // bitstream_restriction_flag
    bit(b);  // motion_vectors_over_pic_boundaries_flag
    ue(b); ue(b); ue(b); ue(b);  // bytes and bits limits, motion vector lengths
    uint32_t reorder = ue(b);
    ue(b);  // max_dec_frame_buffering
    // rbsp_stop_one_bit must follow; a depth of 0 makes the decoder low-delay, which
    // libavformat only trusts after seven pictures.
    if (b->error || !bit(b) || b->error || reorder == 0 || reorder > 16) return 0;

    if (av_image_check_sar((unsigned)width, (unsigned)height, sar) < 0) sar = (AVRational){0, 1};
    out->pix_fmt = pixel_format((int)depth, (int)chroma_format_idc, colorspace, range);
    out->bits_per_raw_sample = (int)depth;
    out->reorder_depth = (int)reorder;
    out->sample_aspect_ratio = sar;
    out->color_range = range;
    out->color_primaries = primaries;
    out->color_trc = trc;
    out->colorspace = colorspace;
    out->chroma_location = chroma_location;
    return 1;
}

int kiln_h264_parameters(const AVCodecParameters *par, KilnH264Parameters *out) {
    memset(out, 0, sizeof(*out));
    const uint8_t *x = par->extradata;
    int n = par->extradata_size;
    // avcC: version 1, profile, compatibility, level, length size, then the SPS count
    // and each SPS as a 16-bit length and a NAL unit. Only a record with one SPS: with
    // several, which one the first picture uses is in its PPS.
    if (par->codec_id != AV_CODEC_ID_H264 || !x || n < 8 || x[0] != 1 || (x[5] & 0x1f) != 1) return 0;
    size_t len = ((size_t)x[6] << 8) | x[7];
    if (len < 4 || 8 + len > (size_t)n || (x[8] & 0x1f) != NAL_SPS) return 0;
    uint8_t *rbsp = malloc(len);
    if (!rbsp) return 0;
    size_t size = unescape(x + 9, len - 1, rbsp);
    Bits b = {rbsp, size * 8, 0, 0};
    int ok = describe(&b, par, out);
    free(rbsp);
    return ok;
}

// The chroma_format_idc of one SPS NAL unit (header byte included), -1 when unreadable.
static int sps_chroma_format(const uint8_t *nal, size_t n) {
    if (n < 5 || (nal[0] & 0x1f) != NAL_SPS) return -1;
    uint8_t rbsp[64];  // profile, flags, level and two Exp-Golomb codes fit well within
    size_t size = unescape(nal + 1, n - 1 < sizeof(rbsp) ? n - 1 : sizeof(rbsp), rbsp);
    Bits b = {rbsp, size * 8, 0, 0};
    int profile = (int)bits(&b, 8);
    skip(&b, 16);
    if (ue(&b) > 31) return -1;
    uint32_t chroma_format_idc = names_chroma_format(profile) ? ue(&b) : 1;
    return b.error || chroma_format_idc > 3 ? -1 : (int)chroma_format_idc;
}

int kiln_h264_chroma_format(const AVCodecParameters *par) {
    const uint8_t *x = par->extradata;
    size_t n = par->extradata_size > 0 ? (size_t)par->extradata_size : 0;
    if (par->codec_id != AV_CODEC_ID_H264 || !x || n < 5) return -1;
    if (x[0] == 1) {  // avcC: the first SPS follows the 6-byte header, after its length
        if (n < 8 || (x[5] & 0x1f) == 0) return -1;
        size_t len = ((size_t)x[6] << 8) | x[7];
        return 8 + len <= n ? sps_chroma_format(x + 8, len) : -1;
    }
    // Annex B (MPEG-TS, raw streams): the first NAL unit after a start code that is an SPS.
    for (size_t i = 0; i + 3 < n; i++) {
        if (x[i] != 0 || x[i + 1] != 0 || x[i + 2] != 1 || (x[i + 3] & 0x1f) != NAL_SPS) continue;
        size_t end = i + 3;
        while (end + 2 < n && !(x[end] == 0 && x[end + 1] == 0 && x[end + 2] <= 1)) end++;
        if (end + 2 >= n) end = n;
        return sps_chroma_format(x + i + 3, end - i - 3);
    }
    return -1;
}
