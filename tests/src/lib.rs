//! Cross-crate and end-to-end tests of `rpc` live in `tests/` of this package; this
//! library is empty.
