//! Byte sizes in the configuration: a number of bytes (`4194304`) or a size with a unit
//! (`"4 MiB"`, `"16KiB"`, `"1MB"`: binary units are powers of 1024, decimal ones of
//! 1000), as the `parse-size` crate reads them. Written back as a number of bytes.
//!
//! Use as `#[serde(with = "rpc_core::byte_size")]` on an unsigned integer field (the
//! settings of `lossless-rpc`'s `protocol` and of a reference's replay limits).

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};

/// Writes the size as a number of bytes.
///
/// # Errors
/// What `serializer` fails with.
pub fn serialize<T, S>(value: &T, serializer: S) -> Result<S::Ok, S::Error>
where
    T: Copy + TryInto<u64>,
    S: Serializer,
{
    // Every field this serves is a u32 or a usize: both fit in a u64.
    serializer.serialize_u64((*value).try_into().unwrap_or(u64::MAX))
}

/// Reads a number of bytes or a size with a unit.
///
/// # Errors
/// A value that is neither a non-negative number nor a size `parse-size` reads, or a
/// size larger than `T` holds (the error says the largest).
pub fn deserialize<'de, T, D>(deserializer: D) -> Result<T, D::Error>
where
    T: TryFrom<u64>,
    D: Deserializer<'de>,
{
    let bytes = deserializer.deserialize_any(SizeVisitor)?;
    T::try_from(bytes).map_err(|_| {
        de::Error::custom(format!(
            "{bytes} bytes is more than this setting can hold ({} bytes at most)",
            max_of::<T>()
        ))
    })
}

/// The largest u64 that converts into `T` (found by halving, as `T` may be u32 or
/// usize).
fn max_of<T: TryFrom<u64>>() -> u64 {
    let mut max = u64::MAX;
    while T::try_from(max).is_err() {
        max >>= 1;
    }
    max
}

struct SizeVisitor;

const EXPECTED: &str = "a size in bytes, as a number (4194304) or with a unit (\"4 MiB\")";

impl Visitor<'_> for SizeVisitor {
    type Value = u64;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str(EXPECTED)
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<u64, E> {
        Ok(value)
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<u64, E> {
        u64::try_from(value)
            .map_err(|_| E::custom(format!("{value} is negative: expected {EXPECTED}")))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<u64, E> {
        parse_size::parse_size(value)
            .map_err(|error| E::custom(format!("`{value}`: {error}: expected {EXPECTED}")))
    }
}
