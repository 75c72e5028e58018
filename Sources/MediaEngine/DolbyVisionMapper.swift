import CFFmpeg
import KilnCore

/// Turns decoded Dolby Vision profile 5 frames into pictures the tone mapper can use:
/// their RPU's reshaping and IPT-PQ-c2 → LMS → RGB matrices applied in software
/// (dovi_map.c), giving linear-light BT.2020 RGB at the output size. Owns the C mapper.
final class DolbyVisionMapper {
    private var mapper: OpaquePointer?
    /// The mapped picture; valid until the next `map`.
    let output: Frame

    /// `whiteNits`: the cd/m² that linear 1.0 stands for in the mapped pictures.
    init(whiteNits: Double) throws(KilnError) {
        guard let m = kiln_dovi_mapper_new(whiteNits) else {
            throw KilnError(.resourceLimit, stage: .filter, "out of memory for the Dolby Vision mapper")
        }
        mapper = m
        output = try Frame()
    }

    deinit { kiln_dovi_mapper_free(&mapper) }

    /// Maps `frame` to `width` x `height` into `output`.
    func map(_ frame: Frame, width: Int32, height: Int32) throws(KilnError) -> Frame {
        let ret = kiln_dovi_map(mapper, frame.pointer, output.pointer, width, height)
        if ret == kiln_averror(ENODATA) {
            throw KilnError(.sourceUnsupported, stage: .filter, underlying: ret,
                            "the Dolby Vision stream's pictures carry no RPU, and without it profile 5 has no colours to map")
        }
        try check(ret, .filter, "cannot map the Dolby Vision picture through its RPU",
                  as: ret == kiln_averror_invaliddata() ? .sourceCorrupt : .internalError)
        return output
    }
}
