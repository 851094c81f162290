// SPDX-License-Identifier: Apache-2.0
import AuthCore

/// A message type that writes itself through ``JSONWriter``, byte for byte as ``ParameterEncoder`` writes its
/// `Encodable` form: for the replies of the hot calls (SetToken's, GetToken's), where `Codable`'s containers cost
/// more than the rest of the reply. `ParameterEncoderTests` holds each to its `Encodable` form.
package protocol JSONWritable: Encodable {
    /// Appends the value as a JSON object, members in order of their names.
    ///
    /// - Throws: `EncodingError.invalidValue` for a number that is not finite, as ``ParameterEncoder`` does.
    func write(into json: inout JSONWriter) throws
}

extension ClaimsPayload: JSONWritable {
    package func write(into json: inout JSONWriter) throws {
        json.raw(#"{"algorithm":"#)
        json.string(algorithm)
        json.raw(#","customerIds":"#)
        json.stringMap(customerIds)
        json.raw(#","expiresAt":"#)
        guard json.number(expiresAt) else {
            throw EncodingError.invalidValue(
                expiresAt, .init(codingPath: [], debugDescription: "expiresAt is not a finite number"))
        }
        if let keyId {
            json.raw(#","keyId":"#)
            json.string(keyId)
        }
        json.raw("}")
    }
}

extension SetTokenResult: JSONWritable {
    package func write(into json: inout JSONWriter) throws {
        json.raw(#"{"claims":"#)
        try claims.write(into: &json)
        json.raw(#","generation":"#)
        json.integer(generation)
        json.raw("}")
    }
}

extension GetTokenResult: JSONWritable {
    package func write(into json: inout JSONWriter) throws {
        json.raw("{")
        if let claims {
            json.raw(#""claims":"#)
            try claims.write(into: &json)
            json.raw(",")
        }
        json.raw(#""generation":"#)
        json.integer(generation)
        if let token {
            json.raw(#","token":"#)
            json.string(token.value)
        }
        json.raw("}")
    }
}
