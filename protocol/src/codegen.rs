//! What the types `idemgen build` and `idemgen client` generate call on either side: the serde
//! adapters that keep an explicit `null` apart from an absent property, and the error of a string
//! enum's `FromStr`. Re-exported by `idemgen-runtime` and `idemgen-client` (`codegen`), so that
//! generated code names only the crate it is generated for.

/// A string that is none of a generated string enum's values (its `FromStr` error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a value of {type_name}")]
pub struct UnknownValue {
    /// The enum's name.
    pub type_name: &'static str,
    /// The string given.
    pub value: String,
}

impl UnknownValue {
    /// The error for `value`, which `type_name` does not have.
    pub fn new(type_name: &'static str, value: &str) -> UnknownValue {
        UnknownValue {
            type_name,
            value: value.to_owned(),
        }
    }
}

/// `deserialize_with` for an optional property that is not nullable: absent is `None`, a value
/// is `Some`, and an explicit `null` is refused (serde's `Option` would take it for absent).
pub fn deserialize_some<'de, T, D>(deserializer: D) -> Result<Option<T>, D::Error>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// `deserialize_with` for an optional, nullable property: absent is `None`, `null` is
/// `Some(None)`, a value `Some(Some(v))`, so that null and absent stay distinct.
pub fn double_option<'de, T, D>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de>,
{
    <Option<T> as serde::Deserialize>::deserialize(deserializer).map(Some)
}

/// `skip_serializing_if` for an optional property: absent is not sent.
pub fn is_none<T>(value: &Option<T>) -> bool {
    value.is_none()
}

/// `with` for an optional property that is not nullable: [`deserialize_some`] to read (an
/// explicit `null` refused), a present value written as itself.
pub mod some {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes a present value as itself (absent values are skipped by [`super::is_none`]).
    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<T>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(serializer)
    }

    /// Absent is `None` (with `default`), a value `Some`, `null` refused.
    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<T>, D::Error> {
        super::deserialize_some(deserializer)
    }
}

/// `with` for an optional, nullable property (`Option<Option<T>>`): [`double_option`] to read,
/// `Some(None)` written as `null`.
pub mod nullable {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    /// Writes `Some(None)` as `null` and `Some(Some(v))` as `v` (absent values are skipped).
    pub fn serialize<T: Serialize, S: Serializer>(
        value: &Option<Option<T>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        value.serialize(serializer)
    }

    /// Absent is `None` (with `default`), `null` is `Some(None)`, a value `Some(Some(v))`.
    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Option<T>>, D::Error> {
        super::double_option(deserializer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_is_refused_or_kept_apart_from_absent() {
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct S {
            #[serde(default, deserialize_with = "deserialize_some")]
            color: Option<String>,
            #[serde(default, deserialize_with = "double_option")]
            note: Option<Option<String>>,
        }
        let absent: S = serde_json::from_str("{}").unwrap();
        assert_eq!((absent.color, absent.note), (None, None));
        assert!(serde_json::from_str::<S>(r#"{"color":null}"#).is_err());
        let null: S = serde_json::from_str(r#"{"note":null}"#).unwrap();
        assert_eq!(null.note, Some(None));
        let set: S = serde_json::from_str(r#"{"color":"red","note":"n"}"#).unwrap();
        assert_eq!(
            (set.color.as_deref(), set.note),
            (Some("red"), Some(Some("n".into())))
        );
    }

    #[test]
    fn the_with_modules_write_what_serde_writes_and_read_like_the_adapters() {
        #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
        struct S {
            #[serde(default, with = "some", skip_serializing_if = "is_none")]
            color: Option<String>,
            #[serde(default, with = "nullable", skip_serializing_if = "is_none")]
            note: Option<Option<String>>,
        }
        for (value, json) in [
            (
                S {
                    color: None,
                    note: None,
                },
                "{}",
            ),
            (
                S {
                    color: Some("red".into()),
                    note: Some(None),
                },
                r#"{"color":"red","note":null}"#,
            ),
            (
                S {
                    color: None,
                    note: Some(Some("n".into())),
                },
                r#"{"note":"n"}"#,
            ),
        ] {
            assert_eq!(serde_json::to_string(&value).unwrap(), json);
            assert_eq!(serde_json::from_str::<S>(json).unwrap(), value);
        }
        assert!(serde_json::from_str::<S>(r#"{"color":null}"#).is_err());
    }

    #[test]
    fn unknown_values_name_the_type_and_the_value() {
        let e = UnknownValue::new("Color", "mauve");
        assert_eq!(e.to_string(), "`mauve` is not a value of Color");
    }
}
