import Testing
@testable import Planner
