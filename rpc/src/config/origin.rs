//! Where a configuration came from, when not from a file: a leaf every part that names an
//! origin in its errors (the configuration itself, the admin endpoint) can import.

/// The origin of a configuration made in code ([`Config::default`](super::Config)).
pub(crate) const BUILT_IN_CODE: &str = "configuration built in code";
