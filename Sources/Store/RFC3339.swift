import Foundation

/// Times as the API and the store's messages write them (2026-12-02T05:10:00.123Z).
public enum RFC3339 {
    public static func string(millis: Int64) -> String {
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return f.string(from: Date(timeIntervalSince1970: Double(millis) / 1000))
    }
}
