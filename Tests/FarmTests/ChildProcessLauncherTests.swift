import Foundation
import KilnCore
import KilnTestSupport
import Testing
@testable import Farm

@Suite("ChildProcessLauncher with a stand-in child script")
struct ChildProcessLauncherTests {
    func script(_ body: String) throws -> (String, URL) {
        let dir = Media.scratch("launcher")
        let path = dir.appendingPathComponent("child.sh").path
        // Written with O_CLOEXEC (Foundation's write leaves its descriptor inheritable): a
        // child another test spawns meanwhile must not keep the script open for writing,
        // which makes exec fail with ETXTBSY for as long as that child lives.
        let file = try FileDescriptor(path: path, flags: O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o755)
        try file.write(Array(("#!/bin/sh\n" + body).utf8), at: 0)
        return (path, dir)
    }

    func spec(_ dir: URL) -> JobSpec {
        let plan = Plan(quality: .mbps1, effectiveQuality: .mbps1, deliveryFormat: .transcode, targetBitrateKbps: 1000,
                        container: "mp4", video: nil, audio: nil, subtitles: [], reasons: [], artifactKey: "k")
        return JobSpec(jobID: 1, artifactID: "a_test", attempt: 1, plan: plan, sourcePath: "/nonexistent",
                       sourceDurationSeconds: 1, outputPath: dir.appendingPathComponent("out.mp4").path)
    }

    @Test("the child gets the plan on stdin, its own process group and the job environment (not the daemon's own KILN_ settings, its token among them); progress and log lines are told apart")
    func environmentAndPipes() throws {
        // A name of the daemon's kind no other test reads: the whole process shares it.
        setenv("KILN_LAUNCHER_TEST_SECRET", "hunter2", 1)
        defer { unsetenv("KILN_LAUNCHER_TEST_SECRET") }
        let (path, dir) = try script("""
            plan=$(cat)
            echo "env: secret=${KILN_LAUNCHER_TEST_SECRET:-none} path=${PATH:+set}" >&2
            echo '{"event":"progress","progress":{"encoded_seconds":1,"duration_seconds":2,"speed":1}}' >&2
            echo "log: parent=$KILN_PARENT_PID nice=$KILN_NICE pgid=$(ps -o pgid= $$ | tr -d ' ') pid=$$" >&2
            echo "args: $*" >&2
            case "$plan" in *'"artifact_key":"k"'*) echo 'plan ok' >&2 ;; esac
            echo '{"ok":false,"error":{"code":"io_error","stage":"write","message":"disk hiccup","retryable":true}}'
            exit 4
            """)
        defer { try? FileManager.default.removeItem(at: dir) }
        let progress = LockedArray<JobProgress>()
        let handle = try ChildProcessLauncher(executable: path, nice: 10).launch(spec(dir)) { progress.append($0) }
        let outcome = try #require(handle.wait(timeout: 20))
        #expect(outcome.termination == .exited(4))
        #expect(outcome.report?.error?.code == "io_error" && outcome.report?.ok == false)
        #expect(progress.values.map(\.encodedSeconds) == [1])
        let pid = try #require(handle.pid)
        #expect(outcome.logTail.contains("log: parent=\(getpid()) nice=10 pgid=\(pid) pid=\(pid)"), "\(outcome.logTail)")
        #expect(outcome.logTail.contains("plan ok"))
        #expect(outcome.logTail.contains("env: secret=none path=set"), "\(outcome.logTail)")
        #expect(outcome.logTail.contains { $0.hasPrefix("args: run /nonexistent --plan - --output ") && $0.hasSuffix("--json --progress-json") })
        #expect(!outcome.logTail.contains { $0.contains("\"event\":\"progress\"") })
    }

    @Test("terminate sends SIGTERM to the group, then SIGKILL to a child that ignores it")
    func termThenKill() throws {
        let (path, dir) = try script("""
            trap '' TERM
            echo '{"event":"progress","progress":{"encoded_seconds":0,"duration_seconds":1,"speed":0}}' >&2
            sleep 30
            """)
        defer { try? FileManager.default.removeItem(at: dir) }
        let progress = LockedArray<JobProgress>()
        let handle = try ChildProcessLauncher(executable: path).launch(spec(dir)) { progress.append($0) }
        // SIGTERM only once the trap is set: on a loaded machine the shell may not have got
        // that far yet, and would then rightly die of the SIGTERM itself.
        #expect(eventually(timeout: 20) { !progress.values.isEmpty })
        #expect(handle.wait(timeout: 0.3) == nil)
        handle.terminate(killAfter: 0.5)
        let outcome = try #require(handle.wait(timeout: 20))
        #expect(outcome.termination == .signaled(SIGKILL))
        #expect(outcome.report == nil)
        let pid = try #require(handle.pid)
        // The orphaned sleep is reaped by init a moment later.
        #expect(eventually(timeout: 10) { kill(-pid, 0) == -1 }, "nothing of the group is left (the sleep went too)")
    }

    @Test("an executable open for writing a moment longer (another thread forked while it was written) still starts")
    func busyExecutable() throws {
        let (path, dir) = try script("echo '{\"ok\":true}'\n")
        defer { try? FileManager.default.removeItem(at: dir) }
        // What a child forked mid-write holds until it execs: the file open for writing.
        let writer = open(path, O_WRONLY | O_CLOEXEC)
        try #require(writer >= 0)
        Thread.detachNewThread { usleep(150_000); close(writer) }
        let handle = try ChildProcessLauncher(executable: path).launch(spec(dir)) { _ in }
        let outcome = try #require(handle.wait(timeout: 20))
        #expect(outcome.termination == .exited(0))
    }

    @Test("a child that honours SIGTERM ends by itself")
    func termHonoured() throws {
        let (path, dir) = try script("exec sleep 30\n")
        defer { try? FileManager.default.removeItem(at: dir) }
        let handle = try ChildProcessLauncher(executable: path).launch(spec(dir)) { _ in }
        handle.terminate(killAfter: 10)
        let outcome = try #require(handle.wait(timeout: 5))
        #expect(outcome.termination == .signaled(SIGTERM))
    }

    @Test("a probe child killed from outside (out of memory) is a retryable resource_limit, not an internal error; one that crashes is still a bug")
    func killedProbe() throws {
        let (killed, dir) = try script("kill -9 $$\n")
        defer { try? FileManager.default.removeItem(at: dir) }
        do { _ = try ChildProcessProber(executable: killed).probe(path: "/nonexistent"); Issue.record("probed") } catch {
            #expect(error.code == .resourceLimit && error.retryable, "\(error)")
        }
        let (crashed, dir2) = try script("kill -SEGV $$\n")
        defer { try? FileManager.default.removeItem(at: dir2) }
        do { _ = try ChildProcessProber(executable: crashed).probe(path: "/nonexistent"); Issue.record("probed") } catch {
            #expect(error.code == .internalError, "\(error)")
        }
    }

    @Test("a child whose watching threads cannot start (a pids or address-space limit) is stopped and reaped at once and the caller told resource_limit: the probe waited its whole 120 s timeout beside a zombie", arguments: 1...4)
    func threadsShort(failing call: Int) throws {
        let dir = Media.scratch("threads-short-\(call)")
        defer { try? FileManager.default.removeItem(at: dir) }
        // A name of its own, which the kernel keeps as the process's name, zombie or not.
        let path = dir.appendingPathComponent("zombiecheck\(call)").path
        do {  // closed before it runs (ETXTBSY)
            let file = try FileDescriptor(path: path, flags: O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o755)
            try file.write(Array("#!/bin/sh\nsleep 30\n".utf8), at: 0)
        }
        let calls = LockedArray<Int>()
        do {
            _ = try ChildProcess.spawn(executable: path, arguments: [], environment: [:], stdin: Data("plan".utf8),
                                       startThread: { work in
                                           calls.append(1)
                                           return calls.values.count != call && Threads.tryStart(work)
                                       }, onStderrLine: { _ in true })
            Issue.record("spawned with a thread missing")
        } catch {
            #expect(error.code == .resourceLimit && error.retryable, "\(error)")
        }
        // Ours, by that name, still there (running or a zombie): none once the reaper is done.
        func children() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { pid in
                guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                      stat.contains("(zombiecheck\(call))") else { return nil }
                let fields = stat[stat.range(of: ")")!.upperBound...].split(separator: " ")
                return fields.count > 2 && Int32(fields[1]) == getpid() ? "\(pid) \(fields[0])" : nil
            }
        }
        var left = children()
        for _ in 0..<100 where !left.isEmpty { usleep(50_000); left = children() }
        #expect(left.isEmpty, "not reaped: \(left)")
    }

    @Test("a missing child binary is an error at launch, not a hang")
    func missingBinary() {
        let dir = Media.scratch("missing")
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(throws: KilnError.self) {
            _ = try ChildProcessLauncher(executable: "/nonexistent/prep-artifact").launch(spec(dir)) { _ in }
        }
    }
}
