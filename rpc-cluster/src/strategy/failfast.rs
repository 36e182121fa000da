//! Failfast: one attempt.

use super::Strategy;

/// Failfast: one attempt and its error goes to the caller (a closing provider's
/// refusal is still re-routed, since that request never ran). It is the trait's
/// defaults.
#[derive(Debug)]
pub(crate) struct Failfast;

impl Strategy for Failfast {}
