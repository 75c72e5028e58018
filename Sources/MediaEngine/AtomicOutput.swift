#if canImport(Glibc)
import Glibc
#endif
import KilnCore

/// The output file's lifecycle: all writing goes to a hidden temporary name in the
/// destination's folder (same file system, so the rename is atomic); it becomes the
/// destination only after verification, fsync of the file, rename and fsync of the
/// folder. Whatever way a run ends otherwise, the temporary file is removed, so the
/// destination is complete and verified, or absent.
final class AtomicOutput {
    let destination: String
    let temporary: String
    /// The destination's folder, synced after the rename.
    let folder: String
    private var committed = false

    /// Marks every temporary name Kiln writes, so a crashed run's leftovers can be found.
    static let marker = ".kiln-tmp-"

    init(destination: String) throws(KilnError) {
        self.destination = destination
        let dir = Path.directory(of: destination)
        guard Path.isDirectory(dir) else {
            throw KilnError(.usage, stage: .write, "the output folder \(dir) does not exist")
        }
        folder = dir
        guard !Path.isDirectory(destination) else {
            throw KilnError(.usage, stage: .write, "the output path is a folder")
        }
        let name = AtomicOutput.temporaryName(for: Path.lastComponent(of: destination), pid: getpid(),
                                              random: UInt32.random(in: 0...UInt32.max))
        temporary = Path.join(dir, name)
        AtomicOutput.removeAbandoned(like: name, in: dir)
    }

    /// Removes the temporary files that earlier runs for the same destination left when
    /// they were killed (SIGKILL, a power cut), which no other run would ever remove: a
    /// killed prepare of a film left gigabytes in a hidden file. A file counts as left
    /// only when the process its name carries is gone; one of a run still going (or of a
    /// PID the system reused) stays. (The daemon also clears its folder at start-up.)
    @discardableResult
    static func removeAbandoned(like ours: String, in dir: String) -> [String] {
        // Ours up to its marker: what follows it (PID and random number) holds no '.'.
        var prefix = Substring(ours)
        while !prefix.isEmpty && !prefix.hasSuffix(marker) { prefix = prefix.dropLast() }
        guard !prefix.isEmpty else { return [] }
        var removed: [String] = []
        for entry in Path.entries(ofDirectory: dir) ?? [] where entry.hasPrefix(prefix) && entry != ours {
            guard let pid = Int32(entry.dropFirst(prefix.count).prefix { $0.isNumber }), pid > 0, pid != getpid(),
                  kill(pid, 0) != 0, errno == ESRCH else { continue }
            if unlink(Path.join(dir, entry)) == 0 { removed.append(entry) }
        }
        return removed
    }

    /// `.<name>.kiln-tmp-<pid>-<random>`; a name so long that this would pass the file
    /// system's limit (255 bytes) is shortened, at a character's boundary, to fit.
    static func temporaryName(for name: String, pid: Int32, random: UInt32) -> String {
        let suffix = "\(marker)\(pid)-\(random)"
        var kept = Substring(name)
        while 1 + kept.utf8.count + suffix.utf8.count > Int(NAME_MAX) { kept = kept.dropLast() }
        return "." + kept + suffix
    }

    deinit { if !committed { unlink(temporary) } }

    /// Removes the temporary file now (cancellation, failure).
    func discard() { if !committed { unlink(temporary) } }

    /// fsync the file (unless the caller already has: `synced`), rename it over the
    /// destination, fsync the folder.
    func commit(synced: Bool = false) throws(KilnError) {
        if !synced { try AtomicOutput.fsync(path: temporary) }
        guard rename(temporary, destination) == 0 else {
            throw AtomicOutput.error(errno, "cannot move the output into place")
        }
        committed = true
        try AtomicOutput.fsync(path: folder)
    }

    static func fsync(path: String) throws(KilnError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw error(errno, "cannot open \(path) to sync it") }
        defer { close(fd) }
        guard Glibc.fsync(fd) == 0 else { throw error(errno, "cannot sync \(path) to disk") }
    }

    static func error(_ e: Int32, _ what: String, stage: KilnError.Stage = .finalize) -> KilnError {
        let code: KilnError.Code = switch e {
        case ENOSPC, EDQUOT: .diskFull
        // No descriptor left (the open-files limit): the machine is short, not the disk.
        case EMFILE, ENFILE: .resourceLimit
        default: .ioError
        }
        return KilnError(code, stage: stage, underlying: e, "\(what): \(String(cString: strerror(e)))")
    }

    /// How much `digest` hashes between two looks at the cancellation flag: about 50 ms.
    static let digestStride: Int64 = 64 << 20

    /// SHA-256 and size of a finished file, read once before it is renamed into place.
    /// (The index goes in front after the last packet, so the bytes are only final once
    /// the trailer is written.) A film's takes seconds after an encode: canceling stops it
    /// within `digestStride`.
    static func digest(path: String, cancellation: Cancellation = Cancellation()) throws(KilnError) -> (sha256: String, bytes: Int64) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw error(errno, "cannot read the output back") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw error(errno, "cannot read the output back") }
        // The finished file, which nothing changes any more (verification and the fsync
        // beside this only read it): mapped, not read. Usually still in the page cache; if
        // blocks were inserted for an index that outgrew its room, ext4 dropped the file's
        // pages, and the mapping reads ahead.
        let hash = SHA256()
        var offset: Int64 = 0
        while offset < Int64(st.st_size) {
            try cancellation.check(.finalize)
            let count = min(digestStride, Int64(st.st_size) - offset)
            do { try hash.update(file: fd, offset: offset, count: count) } catch let e {
                throw error(e.errno, "cannot read the output back")
            }
            offset += count
        }
        return (hash.hexDigest(), Int64(st.st_size))
    }
}

/// Work on a thread of its own: the finished file's SHA-256 and fsync, so they overlap with
/// verification instead of following it, and the source's fingerprint beside the probe's
/// analysis. Whoever starts one waits for it on every path: a thread left running at exit
/// would meet libcrypto torn down under it.
final class Background<T>: @unchecked Sendable {
    private let done = Latch()
    private var result: Result<T, KilnError> = .failure(KilnError(.internalError, stage: .finalize, "not run"))

    init(_ work: @escaping @Sendable () throws(KilnError) -> T) {
        Threads.start { [self] in
            result = Result { () throws(KilnError) in try work() }
            done.open()
        }
    }

    func wait() throws(KilnError) -> T {
        done.wait()
        return try result.get()
    }
}
