// Entry point only: the commands and every callback live in other files (PITFALLS.md:
// closures in main.swift are main-actor isolated and trap when other threads call them).
import Foundation
exit(KilnCommand.run(Array(CommandLine.arguments.dropFirst())))
