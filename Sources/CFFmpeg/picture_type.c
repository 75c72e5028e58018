// The coding type of the picture a packet holds, as libavcodec's parser for the codec
// reads it from the first slice header: see kiln_picture_type in CFFmpeg.h for why.
#include "CFFmpeg.h"
#include <libavcodec/avcodec.h>

int kiln_picture_type(const AVCodecParameters *par, const AVPacket *pkt) {
    if (!par || !pkt || pkt->size <= 0) return AV_PICTURE_TYPE_NONE;
    AVCodecParserContext *parser = av_parser_init(par->codec_id);
    if (!parser) return AV_PICTURE_TYPE_NONE;
    int type = AV_PICTURE_TYPE_NONE;
    AVCodecContext *ctx = avcodec_alloc_context3(NULL);
    // The parser reads the stream's parameter sets (avcC, hvcC) from the context's
    // extradata, and is told the packet is one whole access unit (nothing buffered).
    if (ctx && avcodec_parameters_to_context(ctx, par) >= 0) {
        parser->flags |= PARSER_FLAG_COMPLETE_FRAMES;
        uint8_t *out = NULL;
        int out_size = 0;
        av_parser_parse2(parser, ctx, &out, &out_size, pkt->data, pkt->size, pkt->pts, pkt->dts, pkt->pos);
        if (out_size > 0) type = parser->pict_type;
    }
    avcodec_free_context(&ctx);
    av_parser_close(parser);
    return type;
}
