//! Numbers the `config` crate would round: it turns a fractional value into an integer
//! setting by rounding (and a negative one into 0, since the cast saturates), so
//! `retries: -1.5` would silently mean 0 and `port: 20880.6` would mean 20881; and a
//! number into text its own way, so an unquoted `version: 1.0` would be the text `1`. After the
//! configuration is read, each fractional number of the merged input is compared with
//! the setting it became; one that changed is an error naming its key.
//!
//! The input is compared after its keys were respelled as ours (`spellings.rs`), so a
//! key given under dubbo-go's spelling (`max-limit`) is compared too.

use serde_json::Value;

/// The first number in `input` (the merged file and environment) that did not survive
/// into `read` (the configuration read from it, written back), with its dotted key and
/// what is wrong.
pub(super) fn first_rounded(input: &Value, read: &Value) -> Option<(String, String)> {
    rounded_under(input, read, "")
}

fn rounded_under(input: &Value, read: &Value, path: &str) -> Option<(String, String)> {
    match (input, read) {
        (Value::Object(input), Value::Object(read)) => input.iter().find_map(|(key, value)| {
            let path = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            read.get(key)
                .and_then(|became| rounded_under(value, became, &path))
        }),
        (Value::Array(input), Value::Array(read)) => {
            input
                .iter()
                .zip(read)
                .enumerate()
                .find_map(|(index, (value, became))| {
                    rounded_under(value, became, &format!("{path}[{index}]"))
                })
        }
        (Value::Number(number), became) if number.is_f64() => {
            let given = number.as_f64()?;
            let kept = match became {
                Value::Number(read) => read.as_f64() == Some(given),
                Value::Bool(_) => false,
                // Text (a version, a name): kept only as written. `version: 1.0` unquoted
                // is the number 1, which the `config` crate turns into the text `1`: a
                // consumer asking for "1.0" would find no provider.
                Value::String(text) => *text == number.to_string(),
                _ => true,
            };
            (!kept).then(|| {
                let message = match became {
                    Value::String(text) => format!(
                        "write it as text, quoted: \"{number}\" (unquoted, it is the number \
                         {given}, read as `{text}`)"
                    ),
                    Value::Bool(_) => format!("expected true or false, found {given}"),
                    _ => format!("expected a whole number of at least 0, found {given}"),
                };
                (path.to_owned(), message)
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fractions_rounded_into_integers_or_booleans_are_named() {
        let input = json!({ "consumer": { "retries": -1.5, "jitter": 0.25 }, "a": [1.0, 2.5] });
        let read = json!({ "consumer": { "retries": 0, "jitter": 0.25 }, "a": [1, 2.5] });
        assert_eq!(
            first_rounded(&input, &read),
            Some((
                "consumer.retries".to_owned(),
                "expected a whole number of at least 0, found -1.5".to_owned()
            ))
        );
        let input = json!({ "metrics": { "enabled": 0.5 } });
        let read = json!({ "metrics": { "enabled": true } });
        assert_eq!(first_rounded(&input, &read).unwrap().0, "metrics.enabled");
    }

    #[test]
    fn a_number_read_as_other_text_than_written_is_named() {
        let input = json!({ "provider": { "services": { "a.B": { "version": 1.0 } } } });
        let read = json!({ "provider": { "services": { "a.B": { "version": "1" } } } });
        let (key, message) = first_rounded(&input, &read).unwrap();
        assert_eq!(key, "provider.services.a.B.version");
        assert!(message.contains("quoted: \"1.0\""), "{message}");
    }

    #[test]
    fn whole_numbers_fractions_kept_and_text_pass() {
        let input = json!({ "port": 20880.0, "ratio": 0.2, "version": 1.5, "a": [2.5] });
        let read = json!({ "port": 20880, "ratio": 0.2, "version": "1.5", "a": [2.5] });
        assert_eq!(first_rounded(&input, &read), None);
    }
}
