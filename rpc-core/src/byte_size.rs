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

    /// A YAML or TOML reader gives a whole number too large for an integer as a float
    /// (`99999999999999999999` reads as `1e20`): it is named as a size too large, not as
    /// a float. A float that is a whole number of bytes (`65536.0`) is that number.
    fn visit_f64<E: de::Error>(self, value: f64) -> Result<u64, E> {
        if value < 0.0 {
            return Err(E::custom(format!(
                "{value} is negative: expected {EXPECTED}"
            )));
        }
        if value.fract() != 0.0 || !value.is_finite() {
            return Err(E::custom(format!(
                "{value} is not a whole number of bytes: expected {EXPECTED}"
            )));
        }
        // 2^64 as a float: every float below it converts to a u64 exactly.
        if value >= 18_446_744_073_709_551_616.0 {
            return Err(E::custom(format!(
                "{value:.0} bytes is more than any size ({} bytes at most)",
                u64::MAX
            )));
        }
        Ok(value as u64)
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<u64, E> {
        parse_size::parse_size(value)
            .map_err(|error| E::custom(format!("`{value}`: {error}: expected {EXPECTED}")))
    }
}

#[cfg(test)]
mod tests {
    #[derive(Debug, serde::Deserialize)]
    struct Setting {
        #[serde(with = "super")]
        size: u32,
    }

    fn read(json: &str) -> Result<u32, String> {
        serde_json::from_str::<Setting>(json)
            .map(|setting| setting.size)
            .map_err(|error| error.to_string())
    }

    #[test]
    fn numbers_and_units_are_read() {
        assert_eq!(read(r#"{"size": 65536}"#), Ok(65536));
        assert_eq!(read(r#"{"size": "64KiB"}"#), Ok(65536));
        assert_eq!(read(r#"{"size": "1 MB"}"#), Ok(1_000_000));
        assert_eq!(read(r#"{"size": 65536.0}"#), Ok(65536));
    }

    #[test]
    fn a_number_too_large_for_an_integer_is_named_as_too_large_not_as_a_float() {
        let error = read(r#"{"size": 1e20}"#).unwrap_err();
        assert!(
            error.starts_with("100000000000000000000 bytes is more than any size"),
            "{error}"
        );
        let error = read(r#"{"size": 5000000000}"#).unwrap_err();
        assert!(
            error.contains("more than this setting can hold (4294967295 bytes at most)"),
            "{error}"
        );
    }

    #[test]
    fn fractions_and_negative_numbers_are_refused() {
        let error = read(r#"{"size": 1.5}"#).unwrap_err();
        assert!(
            error.starts_with("1.5 is not a whole number of bytes"),
            "{error}"
        );
        let error = read(r#"{"size": -1}"#).unwrap_err();
        assert!(error.starts_with("-1 is negative"), "{error}");
        let error = read(r#"{"size": -1.0}"#).unwrap_err();
        assert!(error.starts_with("-1 is negative"), "{error}");
    }
}
