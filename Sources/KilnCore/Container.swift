/// Container names as devices and clients use them, from libavformat's demuxer names.
public enum Container {
    /// Maps a demuxer name to the word a client puts in `caps.containers`, by what the file
    /// says it is where libavformat's demuxer reads several: `brand` is an MP4's major brand
    /// (`ftyp`: "qt  " QuickTime, "M4V " iTunes video, "3gp5") or a Matroska file's EBML
    /// DocType ("webm", "matroska"). Without one, the file's extension decides. A
    /// Matroska file named `.webm` that holds H.264 (DocType "matroska") had gone as it was to
    /// a browser that takes only WebM; a QuickTime file named `.mp4` went as MP4.
    public static func name(formatName: String, fileExtension: String, brand: String? = nil) -> String {
        let ext = fileExtension.lowercased()
        let brand = brand?.filter { $0 != " " && $0 != "\0" }.lowercased()
        switch formatName {
        case let f where f.hasPrefix("mov,mp4"):
            if let brand, !brand.isEmpty {
                if brand == "qt" { return "mov" }
                if brand.hasPrefix("m4v") { return "m4v" }
                if brand.hasPrefix("3g") { return "3gp" }
                return "mp4"
            }
            switch ext {
            case "mov", "qt": return "mov"
            case "m4v": return "m4v"
            case "3gp", "3g2": return "3gp"
            default: return "mp4"
            }
        case let f where f.hasPrefix("matroska"):
            if let brand, !brand.isEmpty { return brand == "webm" ? "webm" : "mkv" }
            return ext == "webm" ? "webm" : "mkv"
        case "mpegts": return "ts"
        case "mpeg", "mpegvideo": return "mpeg"
        case "avi": return "avi"
        case "flv": return "flv"
        case "asf": return "wmv"
        case "ogg": return "ogg"
        default: return formatName.split(separator: ",").first.map(String.init) ?? formatName
        }
    }
}
