//! The error every section's `validate` returns, and the checks they share.

use std::time::Duration;

/// A setting whose value is out of range: `key` is relative to the section checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidSetting {
    /// The key, relative to the checked section (`timeout`, `methods.Get.timeout`).
    pub key: String,
    /// What is wrong, with the allowed range.
    pub reason: String,
}

impl InvalidSetting {
    /// This error with its key inside `section` (`retry_budget` + `ttl` →
    /// `retry_budget.ttl`), for a section nested in another.
    pub(crate) fn within(self, section: &str) -> Self {
        Self {
            key: format!("{section}.{}", self.key),
            reason: self.reason,
        }
    }
}

/// Fails with `key` and `reason`.
pub(crate) fn invalid(
    key: impl Into<String>,
    reason: impl Into<String>,
) -> Result<(), InvalidSetting> {
    Err(InvalidSetting {
        key: key.into(),
        reason: reason.into(),
    })
}

/// Fails when an optional duration is set to zero (leaving it out means "none").
pub(crate) fn positive(key: &str, value: Option<Duration>) -> Result<(), InvalidSetting> {
    match value {
        Some(value) if value.is_zero() => {
            invalid(key, "must be more than 0 (leave it out for none)")
        }
        _ => Ok(()),
    }
}
