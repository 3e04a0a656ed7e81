import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SharedCacheEngine
import SharedCacheFormat
import SharedCachePlatform

// Partial content in the store (RFC 9111 §3.3, §3.4): a URL's parts are an entry of their own
// (``PartialContent``), found for a range request, combined with each new 206 of the same
// representation, and stored as the complete response once they hold all of it. Blocking, like
// the rest of the HTTP client's store steps.
extension CacheEngine {
    /// The parts stored for `primaryKey`, pinned; `nil` when there are none (or the entry does
    /// not describe its body).
    func lookupParts(primaryKey: String, accessesDue: inout [(hash: KeyHash, entry: IndexEntry, at: Int64)]) throws
        -> StoredCandidate?
    {
        var pinFailed = false
        guard
            let version = try pinnedVersion(
                PartialContent.key(primaryKey), pinFailed: &pinFailed, accessesDue: &accessesDue),
            case .response(let response) = version.stored, response.status == 206
        else { return nil }
        let candidate = version.candidate(response)
        return candidate.parts == nil ? nil : candidate
    }

    /// Stores a 206 as a part when ``PartialContent/Part`` allows (RFC 9111 §3.3).
    ///
    /// A part with the strong validator and complete length of the parts stored for the URL is
    /// combined with them (§3.4, RFC 9110 §15.3.7.3): the union of their ranges, the stored
    /// fields updated from the new response as §3.2 says. Any other part replaces them. Parts
    /// that then hold the whole representation are stored as its complete 200 response (with
    /// its whole `Content-Length`), so a plain GET finds them. A part of the representation the
    /// URL's complete response holds adds nothing and is not stored; a part of another one
    /// makes that complete response outdated (§4: the most recent response is the one to use),
    /// and it is removed: no answer ever mixes two representations.
    ///
    /// Runs under the URL's fetch lock, like every store, so one process at a time reads,
    /// combines and writes back a URL's parts.
    /// - Returns: what was stored, or `nil` if nothing was.
    func storePart(
        primaryKey: String, request: URLRequest, response: TransportResponse, requestTime: Int64,
        responseTime: Int64, heuristicCap: Int64?
    ) throws -> StoredOutcome? {
        let audience = audience  // read once, as `storagePlan` does
        guard let part = PartialContent.Part(response, request: request, for: audience) else { return nil }
        if let complete = try entry(forKey: primaryKey) {
            switch StoredHTTP(complete.attributes) {
            case .variants:
                break  // what the URL's variants hold is theirs; a part without Vary is not one
            case .response, nil:
                if PartialContent.strongMatch(complete.etag, part.etag) { return nil }
                try remove(KeyHash(key: primaryKey), key: Array(primaryKey.utf8), reason: .superseded, at: nil)
            }
        }
        var ranges = PartialContent.Ranges(length: part.range.length, ranges: [part.range.bytes])
        var body = response.body
        let received = Self.dated(response.headers, receivedAt: responseTime)
        var headers = Self.storableFields(received, for: audience)
        headers.set("Content-Length", nil)
        var ignored: [(hash: KeyHash, entry: IndexEntry, at: Int64)] = []
        if let stored = try lookupParts(primaryKey: primaryKey, accessesDue: &ignored), let held = stored.parts,
            held.length == ranges.length, PartialContent.strongMatch(stored.etag, part.etag),
            let storedBody = try stored.body()
        {
            let (combinedRanges, combinedBody) = held.adding(part.range.bytes, response.body, to: storedBody)
            // Combined past the size limit, they would be a body larger than any a fetch stores
            // (`storeHTTPResponse`): the new part replaces them instead.
            if Int64(combinedBody.count) <= storedBodyLimit {
                (ranges, body) = (combinedRanges, combinedBody)
                headers = Self.updatedFields(stored.response.headers, by: received, for: audience)
            }
        }
        headers.set("Content-Range", nil)
        if ranges.isComplete {
            var complete = response
            complete.status = 200
            headers.set("Content-Length", "\(body.count)")
            complete.headers = headers
            complete.body = body
            return try storeHTTPResponse(
                primaryKey: primaryKey, request: request, response: complete, requestTime: requestTime,
                responseTime: responseTime, heuristicCap: heuristicCap)
        }
        for field in ranges.fields { headers.append("Content-Range", field.description) }
        let lifetime = Freshness.lifetime(
            status: 206, headers: headers, responseTime: responseTime, heuristicCap: heuristicCap, for: audience)
        let birth = Freshness.birth(requestTime: requestTime, responseTime: responseTime, headers: response.headers)
        try storeResponse(
            key: PartialContent.key(primaryKey), body: .data(body),
            StoredResponse(
                status: 206, headers: headers, lifetime: lifetime, mustRevalidate: false, varyValues: [:],
                audience: audience),
            validators: headers, birth: birth)
        return StoredOutcome(lifetime: lifetime, birth: birth)
    }

    /// Removes the parts stored for `primaryKey`, if there are any.
    func removeParts(of primaryKey: String, reason: RemovalReason = .superseded) throws {
        let key = PartialContent.key(primaryKey)
        let hash = KeyHash(key: key)
        guard try currentEntry(hash) != nil else { return }
        try remove(hash, key: Array(key.utf8), reason: reason, at: nil)
    }
}
