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
}
