// Entry point only; the commands live in their own files (PITFALLS.md: closures in
// main.swift are main-actor isolated and trap when C or Dispatch threads call them).
import Glibc
exit(CommandLineTool.main(Array(CommandLine.arguments.dropFirst())))
