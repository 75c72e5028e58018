import Testing
@testable import MediaEngine

@Suite("a file read in another order than stored")
struct ReadOrderTests {
    @Test("spans laid in another order keep the bytes before and after them, join neighbours read in turn, and say where each stored byte is read")
    func laying() {
        // A head of 10 bytes, spans of 5, 7, 3 bytes, a tail of 4: the 2nd and 3rd swapped.
        let spans: [Range<Int64>] = [10..<15, 15..<22, 22..<25]
        let (order, moved) = ReadOrder.laying(spans, in: [0, 2, 1], size: 29)
        #expect(order.pieces == [.init(from: 0, length: 15), .init(from: 22, length: 3), .init(from: 15, length: 7), .init(from: 25, length: 4)])
        #expect(order.pieces.map(\.length).reduce(0, +) == 29)
        #expect(moved(3) == 3 && moved(12) == 12 && moved(16) == 19 && moved(23) == 16 && moved(27) == 27)
    }

    @Test("a Matroska element's header read as Void keeps its length and its data's size, however long its size field: one Void, or empty ones before it where the size needs fewer bytes than are left")
    func voidHeader() throws {
        for (header, size) in [(5, Int64(100)), (8, Int64(1 << 20)), (11, Int64(300)), (12, Int64(1) << 40)] {
            let bytes = try #require(Prober.ClusterWalk.void(header: header, size: size))
            #expect(bytes.count == header)
            // Parsed as EBML: Voids (EC) whose last one's size is the data's.
            var at = 0, last: (data: Int, size: Int?)?
            while at < bytes.count, let e = EBML.element(bytes + Array(repeating: 0, count: 16), at) {
                #expect(e.id == 0xEC)
                last = (e.data, e.size)
                at = e.data + (e.data < header ? e.size ?? 0 : 0)
                if e.data == header { break }
            }
            #expect(last?.data == header && last?.size == Int(size), "\(bytes)")
        }
        #expect(Prober.ClusterWalk.void(header: 5, size: Int64(1) << 40) == nil, "a size that 4 bytes cannot hold")
    }
}
