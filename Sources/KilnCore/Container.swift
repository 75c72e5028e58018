/// Container names as devices and clients use them, from libavformat's demuxer names.
public enum Container {
    /// Maps a demuxer name (and the file's extension, for the mov family where one demuxer
    /// reads mp4, mov, m4v and 3gp alike) to the word a client puts in `caps.containers`.
    public static func name(formatName: String, fileExtension: String) -> String {
        let ext = fileExtension.lowercased()
        switch formatName {
        case let f where f.hasPrefix("mov,mp4"):
            switch ext {
            case "mov", "qt": return "mov"
            case "m4v": return "m4v"
            case "3gp", "3g2": return "3gp"
            default: return "mp4"
            }
        case let f where f.hasPrefix("matroska"):
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
