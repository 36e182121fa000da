//! Cross-crate and end-to-end tests of `rpc` live in `tests/` of this package; this
//! library holds what both those tests and the child programs of `src/bin/` use.

pub mod lab_load;
