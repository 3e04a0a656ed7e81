// The library's vocabulary — entries, configuration, errors, removals, reports — is declared in
// the engine and the format beneath this module, so that they can speak it too. Re-exported
// here, `import SharedCache` is all a user writes, as `import NIO` or `import Collections`
// bring their layers along.
@_exported public import SharedCacheEngine
@_exported public import SharedCacheFormat
