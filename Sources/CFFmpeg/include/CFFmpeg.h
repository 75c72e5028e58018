// The one C module of the media engine: libav headers, plus small wrappers for what
// Swift cannot import (function-like macros, AVERROR constants, variadic logging,
// an interrupt flag that C reads atomically), and libavfilter loaded on first use.
#ifndef KILN_CFFMPEG_H
#define KILN_CFFMPEG_H

#include <libavformat/avformat.h>
#include <libavformat/avio.h>
#include <libavcodec/avcodec.h>
#include <libavcodec/bsf.h>
#include <libavutil/avutil.h>
#include <libavutil/opt.h>
#include <libavutil/dict.h>
#include <libavutil/display.h>
#include <libavutil/pixdesc.h>
#include <libavutil/channel_layout.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/mastering_display_metadata.h>
#include <libavutil/dovi_meta.h>
#include <libavutil/imgutils.h>
#include <libavutil/samplefmt.h>
#include <libavutil/error.h>
#include <libavutil/mathematics.h>
#include <libavutil/crc.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>
// libavfilter's headers give the types (AVFilterGraph, AVFilterContext, AVFilterInOut);
// the library itself is not linked but loaded on first use (see kiln_avfilter_available).
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersrc.h>
#include <libavfilter/buffersink.h>
#include <stddef.h>
#include <stdint.h>

// ---- error codes and constants (macros in libav) ----
static inline int kiln_averror(int errnum) { return AVERROR(errnum); }
static inline int kiln_averror_eof(void) { return AVERROR_EOF; }
static inline int kiln_averror_external(void) { return AVERROR_EXTERNAL; }
static inline int kiln_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int kiln_averror_exit(void) { return AVERROR_EXIT; }
static inline int kiln_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int kiln_averror_decoder_not_found(void) { return AVERROR_DECODER_NOT_FOUND; }
static inline int kiln_averror_demuxer_not_found(void) { return AVERROR_DEMUXER_NOT_FOUND; }
static inline int kiln_averror_encoder_not_found(void) { return AVERROR_ENCODER_NOT_FOUND; }
static inline int kiln_averror_enomem(void) { return AVERROR(ENOMEM); }
static inline int kiln_averror_patchwelcome(void) { return AVERROR_PATCHWELCOME; }
static inline int kiln_averror_enospc(void) { return AVERROR(ENOSPC); }
static inline int kiln_averror_eio(void) { return AVERROR(EIO); }
static inline int kiln_averror_enoent(void) { return AVERROR(ENOENT); }
static inline int kiln_averror_eacces(void) { return AVERROR(EACCES); }
static inline int64_t kiln_nopts_value(void) { return AV_NOPTS_VALUE; }
static inline AVRational kiln_time_base_q(void) { return AV_TIME_BASE_Q; }
static inline int kiln_time_base(void) { return AV_TIME_BASE; }
static inline int kiln_input_buffer_padding_size(void) { return AV_INPUT_BUFFER_PADDING_SIZE; }
static inline int kiln_fftag(char a, char b, char c, char d) { return (int)MKTAG(a, b, c, d); }
static inline int kiln_thread_slice(void) { return FF_THREAD_SLICE; }

/// Fills `buf` with libav's text for an error code (av_err2str is a macro over a
/// compound literal that Swift cannot import).
void kiln_strerror(int errnum, char *buf, size_t size);

// ---- cancellation: a flag the interrupt callback reads atomically ----
typedef struct KilnInterruptFlag KilnInterruptFlag;
KilnInterruptFlag *kiln_interrupt_flag_new(void);
void kiln_interrupt_flag_free(KilnInterruptFlag *flag);
void kiln_interrupt_flag_set(KilnInterruptFlag *flag, int value);
int kiln_interrupt_flag_get(const KilnInterruptFlag *flag);
/// Suitable as AVIOInterruptCB.callback with the flag as opaque.
int kiln_interrupt_callback(void *opaque);
/// Installs `flag` as the interrupt callback of `ctx`.
void kiln_set_interrupt(AVFormatContext *ctx, KilnInterruptFlag *flag);
/// An input's interrupt: `flag` (cancellation), or its read position past a ceiling
/// (a look at one place in the file that found nothing there: junk is read no further).
typedef struct KilnReadGuard KilnReadGuard;
KilnReadGuard *kiln_read_guard_new(KilnInterruptFlag *flag);
void kiln_read_guard_free(KilnReadGuard *guard);
/// Installs `guard` as the interrupt callback of `ctx`, whose read position it watches.
void kiln_read_guard_install(KilnReadGuard *guard, AVFormatContext *ctx);
/// The byte position past which reads are interrupted; negative: none.
void kiln_read_guard_set_ceiling(KilnReadGuard *guard, int64_t ceiling);
/// Whether the ceiling interrupted a read since it was set.
int kiln_read_guard_hit(const KilnReadGuard *guard);

// ---- logging: libav's messages go to a ring buffer instead of stderr ----
/// Routes av_log into a process-wide ring of the last lines at or above `level`;
/// with `echo` set they are also written to stderr.
void kiln_log_capture(int level, int echo);
/// Copies up to `max` most recent lines, newline separated, into `buf` (NUL-terminated).
/// Returns the number of bytes written.
size_t kiln_log_recent(char *buf, size_t size, int max);
/// Counts error-level messages logged since the last reset (concealment statistics).
long kiln_log_error_count(void);
void kiln_log_reset(void);

// ---- options (av_opt_set* take void* to a struct with an AVClass) ----
static inline int kiln_opt_set(void *obj, const char *name, const char *val) {
    return av_opt_set(obj, name, val, AV_OPT_SEARCH_CHILDREN);
}
static inline int kiln_opt_set_int(void *obj, const char *name, int64_t val) {
    return av_opt_set_int(obj, name, val, AV_OPT_SEARCH_CHILDREN);
}
static inline int kiln_opt_set_int_list_pix_fmt(void *obj, const char *name, enum AVPixelFormat fmt) {
    enum AVPixelFormat list[2] = { fmt, AV_PIX_FMT_NONE };
    return av_opt_set_bin(obj, name, (const uint8_t *)list, sizeof(list[0]), AV_OPT_SEARCH_CHILDREN);
}

// ---- libavfilter, loaded on first use ----
// Only a transcode builds a filter graph. Linking libavfilter would make every probe and
// remux child load it and its ~30 dependencies (librsvg, libplacebo, flite, cairo...) at
// start, so it is dlopen'ed by its soname (from LIBAVFILTER_VERSION_MAJOR) the first time
// one of these is needed. Swift calls the kiln_ wrappers below, never libavfilter itself.

/// Loads libavfilter once (thread-safe) and resolves the functions below. Returns 1 when
/// they can be used; otherwise 0, with the reason (the soname and dlerror's text) in
/// `error` (NUL-terminated; may be NULL when `size` is 0).
int kiln_avfilter_available(char *error, size_t size);

// Same signatures and meaning as the libavfilter functions they are named after. Before
// kiln_avfilter_available has succeeded they fail: NULL, AVERROR(ENOSYS), {0, 1}, or
// nothing for the frees.
const AVFilter *kiln_avfilter_get_by_name(const char *name);
AVFilterGraph *kiln_avfilter_graph_alloc(void);
AVFilterContext *kiln_avfilter_graph_alloc_filter(AVFilterGraph *graph, const AVFilter *filter, const char *name);
int kiln_avfilter_graph_config(AVFilterGraph *graphctx, void *log_ctx);
int kiln_avfilter_graph_create_filter(AVFilterContext **filt_ctx, const AVFilter *filt, const char *name,
                                      const char *args, void *opaque, AVFilterGraph *graph_ctx);
void kiln_avfilter_graph_free(AVFilterGraph **graph);
int kiln_avfilter_graph_parse_ptr(AVFilterGraph *graph, const char *filters, AVFilterInOut **inputs,
                                  AVFilterInOut **outputs, void *log_ctx);
int kiln_avfilter_init_str(AVFilterContext *ctx, const char *args);
AVFilterInOut *kiln_avfilter_inout_alloc(void);
void kiln_avfilter_inout_free(AVFilterInOut **inout);
int kiln_av_buffersrc_add_frame_flags(AVFilterContext *buffer_src, AVFrame *frame, int flags);
int kiln_av_buffersink_get_frame(AVFilterContext *ctx, AVFrame *frame);
AVRational kiln_av_buffersink_get_time_base(const AVFilterContext *ctx);

// ---- side data helpers ----
/// The rotation in degrees of a stream's display matrix (counter-clockwise as libav
/// reports it), or NAN when there is none.
double kiln_stream_rotation(const AVStream *st);
/// 1 where the stream's display matrix mirrors the picture (its determinant is negative: a
/// front camera's), 0 otherwise.
int kiln_stream_mirrored(const AVStream *st);
/// The Dolby Vision configuration record of a stream, or NULL.
const AVDOVIDecoderConfigurationRecord *kiln_stream_dovi(const AVStream *st);
/// Whether a stream carries mastering-display or content-light metadata.
int kiln_stream_has_mastering(const AVStream *st);
/// The brightest light HDR content says it holds, in cd/m2: its content light level
/// (MaxCLL) and its mastering display's peak, each the frame's own (SEI) unless that is
/// absent or 0, then the stream's (container). Either is 0 where none is given; `frame`
/// may be NULL.
void kiln_content_light(const AVStream *st, const AVFrame *frame, double *max_cll, double *mastering_peak);
/// The picture codec an MP4 sample entry or AVI FOURCC names (libavformat's MOV and
/// RIFF video tag tables), or AV_CODEC_ID_NONE.
enum AVCodecID kiln_picture_codec_for_tag(unsigned int tag);



// ---- Dolby Vision profile 5 in software (dovi_map.c) ----
/// Maps decoded Dolby Vision frames without a watchable base layer (profile 5, IPTPQc2)
/// through their RPU (AV_FRAME_DATA_DOVI_METADATA) to linear-light BT.2020 RGB.
typedef struct KilnDoviMapper KilnDoviMapper;
/// `white_nits`: the cd/m2 that linear 1.0 stands for in the mapped pictures. NULL when
/// it is not positive or memory ran out.
KilnDoviMapper *kiln_dovi_mapper_new(double white_nits);
/// Frees it and sets *mapper to NULL.
void kiln_dovi_mapper_free(KilnDoviMapper **mapper);
/// Writes `src` scaled to width x height into `dst` as gbrpf32le, linear light with
/// 1.0 = the mapper's white_nits, BT.2020 primaries (tagged so), with src's timestamps and side data and
/// a mastering-display peak from the RPU when the frame has none. A frame without an RPU
/// uses the last one seen. Returns 0; AVERROR(ENODATA) when no RPU has been seen yet;
/// AVERROR_INVALIDDATA for an RPU out of range; other AVERRORs from libav.
int kiln_dovi_map(KilnDoviMapper *mapper, const AVFrame *src, AVFrame *dst, int width, int height);

// ---- the tone map's curve (tone_map.c) ----
/// Applies libavfilter's `tonemap=tonemap=mobius:param=<param>:desat=0:peak=<peak>` to a
/// gbrpf32le frame in place (made writable first), bit for bit as the filter does; 0 or a
/// negative AVERROR (EINVAL for another pixel format).
int kiln_tone_map_mobius(AVFrame *frame, double param, double peak);

// ---- film in interlaced pictures (field_motion.c) ----
/// How much each field of `frame`'s luma moved since the same field of `previous`: the
/// mean absolute difference of a sample of its pixels, in 8-bit code values, into *top
/// and *bottom. AVERROR(EINVAL) for frames of another size or format, or a format without
/// 8- to 16-bit luma samples (RGB, palettes); packed YUV (UYVY) is read where its luma lies.
int kiln_field_motion(const AVFrame *frame, const AVFrame *previous, double *top, double *bottom);
/// How `frame`'s fields weave with its neighbours': into combed[0...4], for its top field
/// with the bottom field of `previous`, of `frame` and of `next` (fieldmatch's p, c and n),
/// then its bottom field with the top field of `previous` and of `next`, how many sampled
/// pixels of the woven luma comb (a line off both its neighbours the same way) by more
/// than `comb_threshold` 8-bit code values beyond the least-combed weave's. Where any
/// weave does, into above[w] and below[w] the sums of how far the weave's line lies from
/// the line above and below it (8-bit code values). *sampled: how many pixels were looked
/// at. AVERROR(EINVAL) as kiln_field_motion.
int kiln_weave_combing(const AVFrame *previous, const AVFrame *frame, const AVFrame *next, int comb_threshold,
                       int64_t combed[5], int64_t above[5], int64_t below[5], int64_t *sampled);

// ---- verification decoding (verify_buffers.c) ----
/// Memory for one picture that every picture a decoder allocates shares.
typedef struct KilnOnePicture KilnOnePicture;
KilnOnePicture *kiln_one_picture_new(void);
/// Frees it (and sets *one to NULL); call after the decoder using it is freed.
void kiln_one_picture_free(KilnOnePicture **one);
/// Makes `ctx` give every picture it allocates the memory of `one` (one picture's worth,
/// reallocated only when the size or format changes). For a decoder that is fed intra
/// pictures only and whose pixels nobody reads: verification, which only asks whether a
/// keyframe decodes. An HEVC decoder otherwise allocates a full picture for every
/// reference an open-GOP keyframe names (25 MB apiece at UHD 10-bit). Call before
/// avcodec_open2; uses ctx->opaque.
void kiln_decode_into_one_picture(AVCodecContext *ctx, KilnOnePicture *one);
/// How many pictures the decoder has asked `one` for (the picture itself, and every
/// reference it had to invent).
int kiln_one_picture_requests(const KilnOnePicture *one);

// ---- H.264 stream parameters without decoding (h264_parameters.c) ----
/// What libavcodec's H.264 decoder reports once it has decoded a first picture.
typedef struct {
    int pix_fmt;                    // enum AVPixelFormat
    int bits_per_raw_sample;
    int reorder_depth;              // pictures the decoder holds back (has_b_frames)
    AVRational sample_aspect_ratio; // {0, 1} when the stream does not say
    int color_range, color_primaries, color_trc, colorspace, chroma_location;
} KilnH264Parameters;

/// Reads `par`'s avcC record (one SPS, with VUI and its bitstream restriction) and fills
/// `out` with what libavcodec's decoder would set after its first picture: the pixel
/// format, depth, reorder depth, aspect ratio and colour description (the container's
/// where the VUI says nothing). `avformat_find_stream_info` decodes an H.264 keyframe only
/// to learn these; given them, it need not. Returns 1 when `out` holds them; 0 for
/// anything this reader does not vouch for (no record, several SPSs, monochrome, depths
/// other than 8 and 10, a left or top crop, a size other than the container's, no
/// reorder depth, wide-gamut or HDR colour, damage): the decoder then says.
int kiln_h264_parameters(const AVCodecParameters *par, KilnH264Parameters *out);

/// The chroma_format_idc (0 monochrome, 1 4:2:0, 2 4:2:2, 3 4:4:4) of the first SPS in
/// `par`'s extradata, avcC or Annex B; -1 when there is none or it cannot be read.
/// libavcodec's decoder gives a monochrome stream's pictures as 4:2:0 with grey chroma,
/// so only the SPS tells a picture that devices' hardware decoders refuse.
int kiln_h264_chroma_format(const AVCodecParameters *par);

// ---- a packet's picture coding type (picture_type.c) ----
/// The coding type (AV_PICTURE_TYPE_I, _P, _B, ...) of the picture in `pkt`, one whole
/// access unit of a stream with parameters `par`, as libavcodec's parser for the codec
/// reads its first slice header; AV_PICTURE_TYPE_NONE when no parser knows or says.
/// A keyframe is not always intra: x264's periodic intra refresh flags P-pictures that
/// carry a recovery point, and decoding recovers over the pictures after it, so such a
/// keyframe cannot be checked by decoding it alone (verification decodes on from it).
int kiln_picture_type(const AVCodecParameters *par, const AVPacket *pkt);

// ---- an HEVC keyframe decoded alone (hevc_keyframe.c) ----
/// Writes into `out` the access unit `in` (length-prefixed, as `hvcc`, the stream's
/// decoder configuration record, says) with its CRA or BLA slices turned into IDR_N_LP
/// slices: the same NAL units, each slice header without its picture order count and
/// reference picture sets, the slice data unchanged. Decoded alone, an open-GOP keyframe
/// (CRA) makes libavcodec invent every picture its reference sets name, for leading
/// pictures nobody decodes: a picture's motion field and memory apiece (~22 MB and ~20 ms
/// at UHD), while its own decoding is that of an IDR picture (H.265 8.1.3: the CRA that
/// starts decoding is handled like a BLA; its references are unavailable, and an intra
/// picture never reads them). Returns 1 when `out` holds the rewrite; 0 when there is
/// nothing to rewrite or anything is not as expected (decode `in` as it is); a negative
/// AVERROR when out of memory.
int kiln_hevc_keyframe_as_idr(const uint8_t *hvcc, int hvcc_size, const AVPacket *in, AVPacket *out);

// ---- AV1 packets as the MP4 muxer reads them (av1_obus.c) ----
/// 1 if every OBU header in `buf` (a temporal unit, as Matroska and MP4 store it) parses
/// and each OBU ends within the packet; 0 otherwise. libavformat 59's MP4 muxer writes an
/// AV1 packet through ff_av1_filter_obus, whose error on such a packet it adds to the
/// media data's size unchecked: the file it writes then has a negative `mdat` size and
/// sample sizes that do not add up, and no error is returned.
int kiln_av1_obus_walk(const uint8_t *buf, int size);

// ---- files (files.c): calls glibc declares only under _GNU_SOURCE ----
/// fallocate(FALLOC_FL_INSERT_RANGE): inserts `length` bytes (whole blocks) at `offset`
/// without moving data on disk. 0, or -1 with errno (EOPNOTSUPP where the file system
/// cannot).
int kiln_insert_range(int fd, int64_t offset, int64_t length);
/// copy_file_range: the kernel copies without the bytes passing through user space.
/// Advances both offsets; returns the bytes copied, 0 at end of input, or -1 with errno.
int64_t kiln_copy_file_range(int in, int64_t *in_offset, int out, int64_t *out_offset, int64_t length);
/// sync_file_range(SYNC_FILE_RANGE_WRITE) over the whole file: starts writing its dirty
/// pages to disk without waiting for them.
int kiln_start_writeback(int fd);
/// glibc's malloc policy (mallopt; 1 if every setting took): free memory above
/// `trim_above` at the top of a heap goes back to the system at once (which also stops
/// glibc moving its thresholds as big blocks come and go); blocks of `map_above` bytes or
/// more get mappings of their own, which the system zeroes page by page each time and
/// takes back at the free; no fast bins, whose small freed blocks every large allocation
/// first merges back (malloc_consolidate).
int kiln_malloc_policy(size_t trim_above, size_t map_above);
/// Hands every malloc heap's free pages back to the system (malloc_trim(0): all arenas,
/// also the free pages inside them); 1 if any memory was released.
int kiln_malloc_release(void);

// ---- the index forecast's output: an MP4 muxed to nowhere (index_recorder.c) ----
/// A seekable write-only AVIOContext that keeps the `head_bytes` bytes from `origin` (where
/// the muxer starts writing, with later patches applied) and every byte written at or
/// after the offset marked by kiln_recorder_keep_from_end; the rest is only counted.
typedef struct KilnRecorder KilnRecorder;
KilnRecorder *kiln_recorder_new(int64_t origin, int64_t head_bytes);
AVIOContext *kiln_recorder_io(KilnRecorder *r);
/// Flushes, then keeps everything written from the current end of the output on.
void kiln_recorder_keep_from_end(KilnRecorder *r);
int64_t kiln_recorder_size(const KilnRecorder *r);
/// Where the lowest write that went back over bytes already written (past the head)
/// began, INT64_MAX if none: a reader following the file's growth would have read what
/// was there before. The MP4 muxer goes back only inside its index (box sizes).
int64_t kiln_recorder_lowest_rewrite(const KilnRecorder *r);
/// The kept bytes from `origin` on (`count` of them: fewer if less was written).
const uint8_t *kiln_recorder_head(const KilnRecorder *r, int64_t *count);
const uint8_t *kiln_recorder_tail(const KilnRecorder *r, int64_t *from, int64_t *count);
void kiln_recorder_free(KilnRecorder **r);

/// A read-only, seekable AVIOContext over the file at `path` (`buffer_size` bytes of
/// buffer) that, once kiln_skim_reader_keep is given a size, reads only the first `keep`
/// bytes of each read longer than its buffer (a packet's payload) and skips the rest,
/// leaving those bytes of the packet unread. See skim_reader.c. NULL with `*error` set on
/// failure.
typedef struct KilnSkimReader KilnSkimReader;
KilnSkimReader *kiln_skim_reader_open(const char *path, int buffer_size, int *error);
AVIOContext *kiln_skim_reader_io(KilnSkimReader *r);
/// 0 reads everything again.
void kiln_skim_reader_keep(KilnSkimReader *r, int64_t keep);
/// A Matroska file: skim only blocks without lacing, read everything else.
void kiln_skim_reader_matroska(KilnSkimReader *r);
/// Reads the file in another order: its bytes as `count` pieces laid end to end, piece k
/// being `length[k]` bytes from `real[k]` (together, every byte of the file once), and
/// `patch_lengths[k]` bytes (at most 16) at each of the `patch_count` offsets `patched`
/// (in that order, ascending, apart) read as bytes `16 k` on of `patch_bytes` (an MP4
/// box's type read as "free", a Matroska element's header as Void). 0, AVERROR(ENOMEM),
/// or AVERROR(EINVAL) for a patch longer than 16 bytes.
int kiln_skim_reader_reorder(KilnSkimReader *r, const int64_t *real, const int64_t *length, int count,
                             const int64_t *patched, const uint8_t *patch_bytes, const int *patch_lengths, int patch_count);
/// Bytes handed to libavformat without being read.
int64_t kiln_skim_reader_skipped(const KilnSkimReader *r);
/// Frees the context and closes the file; the AVFormatContext using it must be closed first.
void kiln_skim_reader_free(KilnSkimReader **r);

// ---- bitmap subtitles painted into pictures (subtitle_overlay.c) ----
/// One decoded bitmap subtitle (its SUBTITLE_BITMAP rectangles on a canvas of
/// `canvas_width` x `canvas_height` whose pixels are `canvas_pixel_aspect` wide for their
/// height, fitted into the picture at that shape and centred; 0 stretches the canvas over
/// the whole picture) drawn for a `width` x `height` picture of square pixels, ready to
/// blend: premultiplied Y'CbCr 4:2:0, limited range, BT.601 coefficients when `bt601`,
/// else BT.709's.
typedef struct KilnOverlay KilnOverlay;
/// NULL with `*error` 0 when nothing lands on the picture, with a negative AVERROR otherwise.
KilnOverlay *kiln_overlay_new(AVSubtitleRect *const *rects, int count, int canvas_width, int canvas_height,
                              double canvas_pixel_aspect, int width, int height, int bt601, int *error);
/// Blends the overlay into an 8-bit 4:2:0 (AV_PIX_FMT_YUV420P) picture of the size it was
/// made for; the frame must be writable. 0 or a negative AVERROR.
int kiln_overlay_blend(const KilnOverlay *o, AVFrame *frame);
void kiln_overlay_free(KilnOverlay **o);

// ---- chapters and metadata for the output ----
/// Copies the input's chapters to the output, shifted by `offset` (AV_TIME_BASE units)
/// and clipped at zero. Returns 0 or a negative AVERROR.
int kiln_copy_chapters(AVFormatContext *out, const AVFormatContext *in, int64_t offset);
/// Puts `count` chapters in place of `s`'s (libavformat's): chapter k from starts[k] to
/// ends[k] (nanoseconds), titled titles[k] (may be NULL). The old ones are freed only once
/// the new ones are made. Returns 0 or a negative AVERROR (the old ones kept).
int kiln_replace_chapters(AVFormatContext *s, int count, const int64_t *ids, const int64_t *starts,
                          const int64_t *ends, const char *const *titles);
/// Leaves out the chapters that start at or after `end` (AV_TIME_BASE units: where the
/// output's pictures and sound end) and ends the others there at the latest.
void kiln_trim_chapters(AVFormatContext *s, int64_t end);
/// Copies a stream's side data (display matrix, Dolby Vision configuration, mastering
/// display and content light metadata) to another stream, except entries of `skip_type`
/// (an AVPacketSideDataType; -1 skips none).
int kiln_copy_stream_side_data(AVStream *out, const AVStream *in, int skip_type);

/// Makes `dst` a mono frame of `src`'s channel `channel` (from 0), its samples copied, its
/// timestamps `src`'s: one programme of a dual-mono sound (two languages side by side).
/// AVERROR(EINVAL) for a channel `src` does not have.
int kiln_frame_one_channel(AVFrame *dst, const AVFrame *src, int channel);

#endif
