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
    fn unknown_values_name_the_type_and_the_value() {
        let e = UnknownValue::new("Color", "mauve");
        assert_eq!(e.to_string(), "`mauve` is not a value of Color");
    }
}
