import Foundation
import Testing

@testable import SharedCache

// How field values are read: quoted strings in Cache-Control, repeated directives.
extension HTTPRulesTests {
    @Test("RFC 9111 §5.2, RFC 9110 §5.6.4: a quoted-pair does not end a quoted string, nor hide a directive")
    func quotedPairsInCacheControl() {
        // The escaped quote keeps the string open: the max-age inside it is no directive…
        #expect(CacheControl(#"x="\", max-age=3600, y=\"""#).maxAge == nil)
        #expect(CacheControl(#"x="\", max-age=3600, y=\"", no-cache"#).noCache)
        // …and one after an escaped backslash is, since that backslash ends nothing.
        #expect(CacheControl(#"x="a\\", max-age=3600"#).maxAge == 3600)
        // A quoted argument is read without its escapes.
        #expect(CacheControl(#"max-age="36\00""#).maxAge == 3600)
        #expect(CacheControl(#"no-cache="X-\A, b""#).noCacheFields == ["x-a", "b"])
    }

    @Test("RFC 9111 §4.2.1: a directive given twice counts as its most restrictive value, in either order")
    func repeatedDirectivesAreMostRestrictive() {
        for value in ["stale-if-error=3600, stale-if-error=60", "stale-if-error=60, stale-if-error=3600"] {
            #expect(CacheControl(value).staleIfError == 60, "\(value)")
        }
        for (first, second) in [(5, 600), (600, 5)] {
            let value = "stale-while-revalidate=\(first), stale-while-revalidate=\(second)"
            #expect(CacheControl(value).staleWhileRevalidate == 5, "\(value)")
        }
        #expect(CacheControl("max-stale=30, max-stale").maxStale == 30)
        #expect(CacheControl("max-stale, max-stale=30").maxStale == 30)
        #expect(CacheControl("min-fresh=600, min-fresh=10").minFresh == 600)
        #expect(CacheControl("min-fresh=10, min-fresh=600").minFresh == 600)
    }
}
