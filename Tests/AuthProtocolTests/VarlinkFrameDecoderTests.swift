// SPDX-License-Identifier: Apache-2.0
import AuthProtocol
import Testing

@Suite("Varlink framing")
struct VarlinkFrameDecoderTests {
    static let stream = Array(#"{"method":"a.B"}"#.utf8) + [0] + Array(#"{"method":"c.D","more":true}"#.utf8) + [0]

    func drain(_ decoder: inout VarlinkFrameDecoder) throws -> [String] {
        var messages: [String] = []
        while let message = try decoder.nextMessage() { messages.append(String(decoding: message, as: UTF8.self)) }
        return messages
    }

    @Test func splitsMessagesArrivingAtOnce() throws {
        var decoder = VarlinkFrameDecoder()
        decoder.append(Self.stream)
        #expect(try drain(&decoder) == [#"{"method":"a.B"}"#, #"{"method":"c.D","more":true}"#])
        #expect(decoder.pendingByteCount == 0)
    }

    @Test func splitsMessagesArrivingByteByByte() throws {
        var decoder = VarlinkFrameDecoder()
        var messages: [String] = []
        for byte in Self.stream {
            decoder.append([byte])
            messages += try drain(&decoder)
        }
        #expect(messages == [#"{"method":"a.B"}"#, #"{"method":"c.D","more":true}"#])
    }

    /// In any chunking, through either way in: a sequence, or a raw buffer (what the server hands over).
    @Test(arguments: 1...7, [false, true])
    func splitsMessagesArrivingInAnyChunking(chunk: Int, raw: Bool) throws {
        var decoder = VarlinkFrameDecoder()
        var messages: [String] = []
        let stream = Array(repeating: Self.stream, count: 50).flatMap { $0 }
        var index = 0
        while index < stream.count {
            let piece = stream[index..<min(index + chunk, stream.count)]
            if raw {
                piece.withUnsafeBytes { decoder.append($0) }
            } else {
                decoder.append(piece)
            }
            messages += try drain(&decoder)
            index += chunk
        }
        #expect(messages.count == 100)
        #expect(decoder.pendingByteCount == 0)
    }

    @Test func keepsAPartialMessageUntilItsNUL() throws {
        var decoder = VarlinkFrameDecoder()
        decoder.append(Array(#"{"method":"#.utf8))
        #expect(try decoder.nextMessage() == nil)
        #expect(decoder.pendingByteCount == 10)
        decoder.append(Array(#""x.Y"}"#.utf8) + [0])
        #expect(try decoder.nextMessage().map { String(decoding: $0, as: UTF8.self) } == #"{"method":"x.Y"}"#)
    }

    @Test func anEmptyMessageIsReturnedForTheCallerToReject() throws {
        var decoder = VarlinkFrameDecoder()
        decoder.append([0])
        #expect(try decoder.nextMessage() == [])
    }

    @Test func acceptsAMessageOfExactlyTheLimit() throws {
        var decoder = VarlinkFrameDecoder(maximumMessageSize: 16)
        decoder.append(Array(repeating: UInt8(ascii: "a"), count: 16) + [0])
        #expect(try decoder.nextMessage()?.count == 16)
    }

    @Test func refusesAMessageOverTheLimitBeforeItsEnd() {
        var decoder = VarlinkFrameDecoder(maximumMessageSize: 16)
        decoder.append(Array(repeating: UInt8(ascii: "a"), count: 16))
        #expect(throws: Never.self) { try decoder.nextMessage() }
        decoder.append([UInt8(ascii: "a")])
        #expect(throws: VarlinkFramingError.messageTooLarge(limit: 16)) { try decoder.nextMessage() }
    }

    @Test func refusesAnOversizedMessageThatArrivesWhole() {
        var decoder = VarlinkFrameDecoder(maximumMessageSize: 16)
        decoder.append(Array(repeating: UInt8(ascii: "a"), count: 17) + [0])
        #expect(throws: VarlinkFramingError.messageTooLarge(limit: 16)) { try decoder.nextMessage() }
    }

    @Test func theDefaultLimitIs64KiB() {
        #expect(VarlinkFrameDecoder().maximumMessageSize == 65_536)
    }
}
