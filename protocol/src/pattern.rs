//! Schema `pattern`s, compiled by one rule that `idemgen check` (rule `pattern-invalid`), the
//! generator's IR and the runtime's generated checks all apply, so a pattern check accepts is
//! exactly one the generated server enforces.
//!
//! The dialect is the one JSON Schema and OpenAPI name, ECMA-262, by `regress`. With the `u`
//! (Unicode) flag that JSON Schema 2020-12 recommends (`.` and classes match code points); a
//! pattern only the non-Unicode grammar accepts (ECMA-262 Annex B: identity escapes such as `\-`
//! or `\!` inside a class, common in published specs) is compiled without it, as browsers and
//! validators without a Unicode mode read it. Patterns are not anchored: `^…$` anchors them.

/// Compiles `source`: `Err` is the engine's reason (for a message), or a limit it exceeds.
pub fn compile(source: &str) -> Result<regress::Regex, String> {
    within_limits(source)?;
    regress::Regex::with_flags(source, "u")
        .or_else(|unicode| regress::Regex::new(source).map_err(|_| unicode.to_string()))
}

/// The most `|` a pattern may have: `regress` nests alternatives one level each, and compiling a
/// few thousand overflows a 2 MiB stack (a test thread's, a tokio worker's) in a debug build.
pub const MAX_ALTERNATIVES: usize = 1000;

/// The deepest lookarounds may nest: `regress` matches each one in a nested call, and about 24
/// overflow a 2 MiB stack in a debug build.
pub const MAX_LOOKAROUND_DEPTH: usize = 8;

/// Refuses patterns whose structure would exhaust the stack of the engine (which aborts the
/// process, not a panic): too many alternatives, lookarounds nested too deep. A scan
/// of the source, not a parse: `\` escapes and `[…]` classes are skipped, anything malformed is
/// left to the engine to refuse.
fn within_limits(source: &str) -> Result<(), String> {
    let (mut alternatives, mut groups, mut depth) = (0usize, Vec::new(), 0usize);
    let mut chars = source.chars();
    let mut class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            ']' if class => class = false,
            _ if class => {}
            '[' => class = true,
            '|' => alternatives += 1,
            '(' => {
                let mut ahead = chars.clone();
                let lookaround = ahead.next() == Some('?')
                    && match ahead.next() {
                        Some('=' | '!') => true,
                        Some('<') => matches!(ahead.next(), Some('=' | '!')),
                        _ => false,
                    };
                groups.push(lookaround);
                if lookaround {
                    depth += 1;
                    if depth > MAX_LOOKAROUND_DEPTH {
                        return Err(format!(
                            "lookarounds nested deeper than {MAX_LOOKAROUND_DEPTH}"
                        ));
                    }
                }
            }
            ')' => depth -= usize::from(groups.pop() == Some(true)),
            _ => {}
        }
    }
    if alternatives > MAX_ALTERNATIVES {
        return Err(format!(
            "more than {MAX_ALTERNATIVES} alternatives, more than the engine's stack allows"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unicode_patterns_and_annex_b_escapes_compile_and_match_anywhere() {
        let digits = compile("^[0-9]{4}$").unwrap();
        assert!(digits.find("1234").is_some() && digits.find("12345").is_none());
        assert!(
            compile("[a-z]").unwrap().find("ABCd").is_some(),
            "not anchored"
        );
        assert!(
            compile("^(?=.*[0-9]).{8,}$")
                .unwrap()
                .find("abcdefg1")
                .is_some()
        );
        // Code points with `u`: one `.` is one emoji.
        assert!(compile("^.$").unwrap().find("😀").is_some());
        // PayPal's `\-` and `\!` inside classes: Annex B, read without `u`.
        let legacy = compile(r#"^[a-zA-Z0-9_'\-., :;\!?"]*$"#).unwrap();
        assert!(legacy.find("it's ok - yes!").is_some());
        assert!(legacy.find("no <tags>").is_none());
        assert!(compile("(unclosed").is_err());
        assert!(compile("[").is_err());
    }

    #[test]
    fn patterns_that_would_exhaust_the_stack_are_refused() {
        let alternatives = "a|".repeat(MAX_ALTERNATIVES + 1) + "a";
        assert!(compile(&alternatives).unwrap_err().contains("alternatives"));
        let deep =
            "(?=".repeat(MAX_LOOKAROUND_DEPTH + 1) + "a" + &")".repeat(MAX_LOOKAROUND_DEPTH + 1);
        assert!(compile(&deep).unwrap_err().contains("lookarounds"));
        assert!(compile(&("a|".repeat(MAX_ALTERNATIVES) + "b")).is_ok());
        // Escaped and in classes, `|` and `(?=` are characters; groups that are not lookarounds
        // (`(?:`, `(?<name>`) do not count towards their depth.
        let escaped = "\\|[|]".repeat(MAX_ALTERNATIVES) + "x";
        assert!(within_limits(&escaped).is_ok());
        assert!(within_limits(&"[(?=]\\(?=".repeat(20)).is_ok());
        assert!(within_limits(&"(?:(?<n>(?<!a)".repeat(8)).is_ok());
        assert!(within_limits(&"(?<!(?<=".repeat(5)).is_err());
        // Siblings do not nest.
        assert!(within_limits(&"(?=a)".repeat(100)).is_ok());
    }
}
