// `kiln-bench`: the farm's and the daemon's own figures for `make bench` (issues 4 and 5).
// Entry point only; the work lives in FarmBench.swift.
import Foundation
exit(FarmBench.main(Array(CommandLine.arguments.dropFirst())))
