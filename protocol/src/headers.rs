//! Response headers the protocol defines or stores (protocol.md, "Headers stored with a result").

/// The header that marks a replayed response (lower case, as on the wire in HTTP/2).
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// Headers that may be stored with a result whatever the operation declares. Everything else is
/// dropped unless the operation declares it.
pub const DEFAULT_HEADER_ALLOWLIST: [&str; 5] = [
    "location",
    "content-type",
    "content-location",
    "etag",
    "last-modified",
];

/// Headers never stored, even when an operation declares them.
pub const NEVER_STORED: [&str; 3] = ["set-cookie", "authorization", "proxy-authorization"];

/// Whether a response header named `name` may be stored with a result of an operation that
/// declares `declared` (names compared case-insensitively).
pub fn header_is_storable(name: &str, declared: &[&str]) -> bool {
    if NEVER_STORED.iter().any(|n| n.eq_ignore_ascii_case(name)) {
        return false;
    }
    DEFAULT_HEADER_ALLOWLIST
        .iter()
        .chain(declared)
        .any(|d| d.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allowlist_and_never_stored() {
        assert!(header_is_storable("Location", &[]));
        assert!(header_is_storable("x-rate-limit", &["X-Rate-Limit"]));
        assert!(!header_is_storable("x-request-id", &[]));
        assert!(!header_is_storable("Set-Cookie", &["set-cookie"]));
    }
}
