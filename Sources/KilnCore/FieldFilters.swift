/// The smallest picture whose fields Kiln works on (deinterlacing, field matching, inverse
/// telecine, and the probe's survey of what the fields carry). libavfilter 8's bwdif
/// refuses a plane under 3 columns or 4 lines (a 720x2 or 4x8 interlaced picture failed
/// its transcode), and its fieldmatch reads past its buffers below 10 lines (valgrind).
/// 16 a side keeps every plane of every subsampling (4:1:0's quarter planes) above both. No
/// broadcast, disc or camera makes interlaced pictures that small: a smaller one is taken
/// as progressive. The planner plans by it and the engine builds its filters by it.
public enum FieldFilters {
    public static let smallestSide = 16

    public static func fit(width: Int, height: Int) -> Bool {
        width >= smallestSide && height >= smallestSide
    }
}
