//! Schema `pattern`s, compiled by one rule that `idemgen check` (rule `pattern-invalid`), the
//! generator's IR and the runtime's generated checks all apply, so a pattern check accepts is
//! exactly one the generated server enforces.
//!
//! The dialect is the one JSON Schema and OpenAPI name, ECMA-262, validated by `regress`. With
//! the `u` (Unicode) flag that JSON Schema 2020-12 recommends (`.` and classes match code
//! points); a pattern only the non-Unicode grammar accepts (ECMA-262 Annex B: identity escapes
//! such as `\-` or `\!` inside a class, common in published specs) is compiled without it, as
//! browsers and validators without a Unicode mode read it. Patterns are not anchored: `^…$`
//! anchors them.
//!
//! Matching takes time linear in the value whenever the pattern is regular: its syntax tree
//! ([`syntax`]) is written in the `regex` crate's syntax with ECMA-262's meanings and matched
//! by that crate's automata, whatever the value (`^(a+)+$` included). A pattern with a
//! lookaround or a backreference is written the same way in `fancy-regex`'s syntax and matched
//! by that crate's backtracking engine under a step budget ([`BACKTRACK_LIMIT`]): a value the
//! budget does not decide is [`Undecided`], never a worker held. Only what neither translation
//! takes (a construct the tree does not parse) is matched by `regress`, which backtracks as
//! JavaScript engines do, without a budget; [`nested_quantifier`] tells which patterns could then
//! take exponential time, and `idemgen check` reports them.

mod sample;
mod syntax;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex {
    engine: Engine,
}

#[derive(Debug, Clone)]
enum Engine {
    /// The `regex` crate: time linear in the value.
    Linear(regex::Regex),
    /// `fancy-regex`, for lookarounds and backreferences: backtracking within a step budget.
    Bounded(Box<fancy_regex::Regex>),
    /// `regress`, for what the tree does not take: backtracking without a budget.
    Backtracking(regress::Regex),
}

/// The most backtracking steps one match may take on the bounded engine: past it the value is
/// [`Undecided`]. 7 to 25 ms of one core in a debug build for a value that almost matches
/// `^((?=a)a+)+$`; `fancy-regex` hands the regular parts of a pattern to the `regex` crate, so
/// only its lookarounds and backreferences spend steps.
pub const BACKTRACK_LIMIT: usize = 100_000;

/// A value the bounded engine could not match or refute within [`BACKTRACK_LIMIT`] steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undecided;

impl std::fmt::Display for Undecided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "not decided within the pattern's budget of {BACKTRACK_LIMIT} backtracking steps"
        )
    }
}

impl Regex {
    /// Whether `value` matches somewhere (not anchored); a value the budget does not decide
    /// does not match (see [`Regex::matches`]).
    pub fn is_match(&self, value: &str) -> bool {
        self.matches(value).unwrap_or(false)
    }

    /// Whether `value` matches somewhere (not anchored), or [`Undecided`] when the bounded
    /// engine ran out of its budget first.
    pub fn matches(&self, value: &str) -> Result<bool, Undecided> {
        match &self.engine {
            Engine::Linear(regex) => Ok(regex.is_match(value)),
            Engine::Bounded(regex) => regex.is_match(value).map_err(|_| Undecided),
            Engine::Backtracking(regex) => Ok(regex.find(value).is_some()),
        }
    }

    /// Whether matching takes time linear in the value (the `regex` crate's engine); `false`
    /// when the pattern needs a backtracking one (a lookaround or a backreference).
    pub fn is_linear(&self) -> bool {
        matches!(self.engine, Engine::Linear(_))
    }

    /// Whether matching takes bounded time: linear, or backtracking within [`BACKTRACK_LIMIT`];
    /// `false` only for a pattern left to `regress`.
    pub fn is_bounded(&self) -> bool {
        !matches!(self.engine, Engine::Backtracking(_))
    }
}

/// Compiles `source`: `Err` is the engine's reason (for a message), or a limit it exceeds.
pub fn compile(source: &str) -> Result<Regex, String> {
    within_limits(source)?;
    let backtracking = regress::Regex::with_flags(source, "u")
        .or_else(|unicode| regress::Regex::new(source).map_err(|_| unicode.to_string()))?;
    let tree = syntax::parse(source).ok();
    let linear = tree
        .as_ref()
        .and_then(|tree| syntax::to_regex(tree).ok())
        .and_then(|translated| {
            regex::RegexBuilder::new(&translated)
                .size_limit(LINEAR_SIZE_LIMIT)
                .build()
                .ok()
        });
    if let Some(regex) = linear {
        return Ok(Regex {
            engine: Engine::Linear(regex),
        });
    }
    let bounded = tree
        .as_ref()
        .and_then(|tree| syntax::to_fancy(tree).ok())
        .and_then(|translated| {
            fancy_regex::RegexBuilder::new(&translated)
                .backtrack_limit(BACKTRACK_LIMIT)
                .delegate_size_limit(LINEAR_SIZE_LIMIT)
                .build()
                .ok()
        });
    Ok(Regex {
        engine: match bounded {
            Some(regex) => Engine::Bounded(Box::new(regex)),
            None => Engine::Backtracking(backtracking),
        },
    })
}

/// The most memory one pattern's linear automaton may take; a larger one (counted repetitions
/// in the thousands) is matched by the backtracking engine.
const LINEAR_SIZE_LIMIT: usize = 4 << 20;

/// Whether `source` nests an unbounded repetition inside another repetition (`^(a+)+$`,
/// `(\w+\s?)*`): exponential on backtracking engines (most validators, browsers, clients), and
/// on the generated server when the pattern also needs backtracking (a lookaround or a
/// backreference: `!compile(source)?.is_linear()`). `None` when the pattern is not one this
/// module parses.
pub fn nested_quantifier(source: &str) -> Option<bool> {
    syntax::parse(source)
        .ok()
        .map(|tree| syntax::nested_quantifier(&tree))
}

/// Whether `source` has a lookaround or a backreference, which only a backtracking engine
/// matches. `None` when the pattern is not one this module parses.
pub fn needs_backtracking(source: &str) -> Option<bool> {
    syntax::parse(source)
        .ok()
        .map(|tree| syntax::needs_backtracking(&tree))
}

/// A value of `min_chars..=max_chars` characters that `source` matches, drawn from `seed` (one
/// seed, one value; another seed, most often another value): generated from the pattern's
/// syntax tree, what the tree does not decide (lookarounds, backreferences) settled by search,
/// and every candidate checked by the compiled pattern. A pattern outside the tree's syntax (or
/// one the walk found nothing for) is tried with plain candidates: digits, letters, both. `None` when the pattern does not compile
/// or nothing was found.
pub fn sample(source: &str, seed: u64, min_chars: usize, max_chars: usize) -> Option<String> {
    let regex = compile(source).ok()?;
    let tree = syntax::parse(source).ok();
    if let Some(found) = tree
        .as_ref()
        .and_then(|tree| sample::sample(tree, &regex, seed, min_chars, max_chars))
    {
        return Some(found);
    }
    const ALPHABETS: [&str; 7] = [
        "0123456789",
        "abcdefghijklmnopqrstuvwxyz",
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        "a1b2c3d4e5f6g7h8i9j0",
        "Ab1Cd2Ef3Gh4Ij5Kl6Mn7",
        "Ab1!Cd2?Ef3-Gh4_Ij5.",
        "a-b-c-d-e-f-g-h-i-j-k",
    ];
    let lengths = [
        min_chars.max(1),
        1,
        2,
        3,
        4,
        6,
        8,
        10,
        12,
        16,
        20,
        24,
        32,
        36,
    ];
    ALPHABETS
        .iter()
        .flat_map(|alphabet| {
            lengths
                .iter()
                .filter(|&&len| len >= min_chars && len <= max_chars)
                .map(move |&len| {
                    // Rotated by the seed: another seed, another value where one fits.
                    let skip = (seed % alphabet.len() as u64) as usize;
                    alphabet
                        .chars()
                        .cycle()
                        .skip(skip)
                        .take(len)
                        .collect::<String>()
                })
        })
        .find(|candidate| regex.is_match(candidate))
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
        assert!(digits.is_match("1234") && !digits.is_match("12345"));
        assert!(compile("[a-z]").unwrap().is_match("ABCd"), "not anchored");
        assert!(compile("^(?=.*[0-9]).{8,}$").unwrap().is_match("abcdefg1"));
        // Code points with `u`: one `.` is one emoji.
        assert!(compile("^.$").unwrap().is_match("😀"));
        // PayPal's `\-` and `\!` inside classes: Annex B, read without `u`.
        let legacy = compile(r#"^[a-zA-Z0-9_'\-., :;\!?"]*$"#).unwrap();
        assert!(legacy.is_match("it's ok - yes!"));
        assert!(!legacy.is_match("no <tags>"));
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

    /// The linear engine agrees with `regress` on every pattern it takes: ECMA-262's `.` (no
    /// line terminator), ASCII `\d`, `\w` and `\b`, its `\s`, classes, escapes, counted
    /// repetition, alternation, anchors, Annex B braces; lookarounds and backreferences stay
    /// on `regress`.
    #[test]
    fn the_linear_engine_matches_as_regress_does() {
        let patterns = [
            "^[A-Z]{3}-[0-9]{4}$",
            "^SKU-[0-9]{4}$",
            r"^\d+$",
            r"^\w+$",
            r"^\s*$",
            r"^\S+$",
            r"^[^\d\s]+$",
            r"\bcat\b",
            r"\Bat",
            "^.+$",
            "^a.c$",
            "^(ab|cd)+$",
            "^(?:x|y){2,3}$",
            "^a{2,}$",
            "a{,3}",
            "x{y}",
            r"^\x41\u0042\u{43}$",
            r"^[\t\n\r\v\f]$",
            r"^\.\*\+\?\(\)\[\]\{\}\|\^\$\/$",
            r#"^[a-zA-Z0-9_'\-., :;\!?"]*$"#,
            "^[é-ü]+$",
            "^😀+$",
            "^(?<year>[0-9]{4})-(?<month>[0-9]{2})$",
            "^a*?b$",
            "[-a]",
            "[a-]",
            r"^[\b]$",
            "^$",
            "|a",
            r"\cJ",
            "]",
        ];
        let values = [
            "",
            "a",
            "ab",
            "abc",
            "a.c",
            "a\nc",
            "a\rc",
            "a\u{2028}c",
            "ABC-1234",
            "SKU-0042",
            "123",
            "١٢٣",
            "abc_1",
            "é",
            "ü",
            "ß",
            " ",
            "\t",
            "\u{a0}",
            "\u{3000}",
            "\u{feff}",
            "\u{85}",
            "a cat sat",
            "concatenate",
            "xyxy",
            "xy",
            "xxx",
            "aa",
            "aaaa",
            "x{y}",
            "ABC",
            "\n",
            "\u{0b}",
            ".*+?()[]{}|^$/",
            "it's ok - yes!",
            "no <tags>",
            "éü",
            "😀😀",
            "2026-12",
            "aaab",
            "-",
            "\u{8}",
            "]",
            "J",
            "\u{a}",
        ];
        for pattern in patterns {
            let compiled = compile(pattern).unwrap();
            assert!(compiled.is_linear(), "{pattern} is regular");
            let reference = regress::Regex::with_flags(pattern, "u")
                .or_else(|_| regress::Regex::new(pattern))
                .unwrap();
            for value in values {
                assert_eq!(
                    compiled.is_match(value),
                    reference.find(value).is_some(),
                    "{pattern:?} on {value:?}"
                );
            }
        }
        for backtracking in ["^(?=.*[0-9]).{8,}$", r"^(a)\1$", "(?<!x)y", r"^\p{L}+$"] {
            assert!(
                !compile(backtracking).unwrap().is_linear(),
                "{backtracking}"
            );
        }
    }

    /// The bounded engine agrees with `regress` on lookarounds (ahead and behind, negated or
    /// not, of any length), backreferences by number and by name, and `\b` beside them.
    #[test]
    fn the_bounded_engine_matches_as_regress_does() {
        let patterns = [
            "^(?=.*[0-9]).{8,}$",
            "^(?=.*[0-9])(?=.*[A-Z])(?!.*\\s).{8,}$",
            r"^(a)\1$",
            r"^(['\x22])[a-z]*\1$",
            r"^(?<q>[xy])-\k<q>$",
            r"^(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)\10$",
            r"^(a)\1{2}$",
            "(?<!x)y",
            "(?<=ab)c",
            "(?<=a+)c",
            "(?<![0-9]{2})z",
            r"\bcat\b(?=!)",
            r"\Bat(?!e)",
            "^(?!test)[a-z]{4}$",
            "^(?:(?!ab).)*$",
            "^((?=a)a|b)+$",
        ];
        let values = [
            "",
            "a",
            "aa",
            "aaa",
            "abc",
            "abcdefg1",
            "Abcdefg1",
            "Abcd efg1",
            "'abc'",
            "\"ab\"",
            "'ab\"",
            "x-x",
            "x-y",
            "y-y",
            "abcdefghijj",
            "abcdefghija",
            "y",
            "xy",
            "zy",
            "abc",
            "aac",
            "bc",
            "c",
            "12z",
            "1z",
            "z",
            "cat!",
            "a cat!",
            "concat!",
            "bat",
            "bate",
            "test",
            "tess",
            "xxab",
            "xxxx",
            "abab",
            "ba",
            "éa",
            "a\nb",
        ];
        for pattern in patterns {
            let compiled = compile(pattern).unwrap();
            assert!(
                !compiled.is_linear() && compiled.is_bounded(),
                "{pattern} is on the bounded engine"
            );
            let reference = regress::Regex::with_flags(pattern, "u")
                .or_else(|_| regress::Regex::new(pattern))
                .unwrap();
            for value in values {
                assert_eq!(
                    compiled.matches(value),
                    Ok(reference.find(value).is_some()),
                    "{pattern:?} on {value:?}"
                );
            }
        }
        // What the tree does not parse stays on regress, without a budget.
        assert!(!compile(r"^\p{L}+$").unwrap().is_bounded());
    }

    /// A nested quantifier around a lookaround (which keeps it off the linear engine) against a
    /// value that almost matches: undecided within the budget, at once, at any length; a value
    /// that matches, or fails early, is decided.
    #[test]
    fn a_catastrophic_backtracking_pattern_is_undecided_within_its_budget() {
        let pattern = compile("^((?=a)a+)+$").unwrap();
        assert!(pattern.is_bounded() && !pattern.is_linear());
        for length in [41, 1_000, 100_000] {
            let hostile = "a".repeat(length) + "!";
            let started = std::time::Instant::now();
            assert_eq!(pattern.matches(&hostile), Err(Undecided), "{length}");
            assert!(!pattern.is_match(&hostile));
            // Milliseconds for the budget; the bound only tells a budget from a runaway.
            assert!(
                started.elapsed() < std::time::Duration::from_secs(2),
                "{length}"
            );
        }
        assert_eq!(pattern.matches(&"a".repeat(100_000)), Ok(true));
        assert_eq!(pattern.matches("b"), Ok(false));
    }

    /// `^(a+)+$` against a value that almost matches: exponential on a backtracking engine
    /// (26 characters took 4.7 s), one pass here, at any length.
    #[test]
    fn nested_quantifiers_match_in_linear_time() {
        let pattern = compile("^(a+)+$").unwrap();
        assert!(pattern.is_linear());
        for length in [41, 10_000, 200_000] {
            let hostile = "a".repeat(length) + "!";
            let started = std::time::Instant::now();
            assert!(!pattern.is_match(&hostile));
            assert!(pattern.is_match(&hostile[..length]));
            // A bound far above one pass (microseconds) and far below a backtracking run
            // (which at 41 characters would take hours): the test fails by not ending.
            assert!(
                started.elapsed() < std::time::Duration::from_secs(5),
                "{length}"
            );
        }
    }

    #[test]
    fn nested_quantifiers_are_told() {
        for nested in [
            "^(a+)+$",
            "(a*)*",
            r"^(\w+\s?)*$",
            "([a-z]+)*x",
            "(?:(a|b)+c?)+",
            "(-[a-z-]+)*",
        ] {
            assert_eq!(nested_quantifier(nested), Some(true), "{nested}");
        }
        for plain in [
            "^a+$",
            "^(ab)+$",
            r"^(\d{3})+$",
            "(a+){2}",
            "^[a-z]+(-[a-z]+)*$",
            r"^\w+(\.\w+)*@\w+$",
            r"^(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]+$",
            "(a+)?",
        ] {
            assert_eq!(nested_quantifier(plain), Some(false), "{plain}");
        }
        assert_eq!(needs_backtracking("^(?=a)"), Some(true));
        assert_eq!(needs_backtracking("^a$"), Some(false));
    }

    #[test]
    fn samples_match_their_pattern_within_the_lengths_and_vary_with_the_seed() {
        let shapes = [
            ("^[A-Z]{3}-[0-9]{4}$", 0, usize::MAX),
            ("^SKU-[0-9]{4}$", 0, usize::MAX),
            ("^A[0-9]$", 0, usize::MAX),
            ("^(EUR|USD|GBP)$", 0, usize::MAX),
            ("^[a-z]+(-[a-z]+)*$", 0, usize::MAX),
            (r"^\d{2,4}\.\d{2}$", 0, usize::MAX),
            ("^[^@ ]+@[^@ ]+\\.[a-z]{2,}$", 0, usize::MAX),
            (r"^\w{8,12}$", 8, 12),
            ("^(?=.*[0-9])(?=.*[A-Z]).{8,}$", 8, 64),
            ("^(a)\\1$", 0, usize::MAX),
            ("[a-z]", 5, 10),
            ("^[a-z0-9]{3,5}$", 3, 5),
            ("^(?!test)[a-z]{4}$", 0, usize::MAX),
            (r"^[\p{L}]+$", 0, usize::MAX),
            (r"^\S+$", 1, 20),
            ("^[^a-z]{2}$", 0, usize::MAX),
            (".", 0, usize::MAX),
        ];
        for (pattern, min, max) in shapes {
            let regex = compile(pattern).unwrap();
            let mut seen = std::collections::BTreeSet::new();
            for seed in 0..8 {
                let value = sample(pattern, seed, min, max)
                    .unwrap_or_else(|| panic!("{pattern}: no value"));
                assert!(regex.is_match(&value), "{pattern}: {value:?}");
                assert!(
                    (min..=max).contains(&value.chars().count()),
                    "{pattern}: {value:?}"
                );
                seen.insert(value);
            }
            // Fresh per seed where the pattern leaves room for it.
            let fixed = ["^A[0-9]$", "^(EUR|USD|GBP)$", "^(a)\\1$"];
            if !fixed.contains(&pattern) {
                assert!(seen.len() >= 4, "{pattern}: {seen:?}");
            }
        }
        // One seed, one value.
        assert_eq!(
            sample("^[A-Z]{3}-[0-9]{4}$", 7, 0, 64),
            sample("^[A-Z]{3}-[0-9]{4}$", 7, 0, 64)
        );
        // Nothing fits: none.
        assert_eq!(sample("^[a-z]{10}$", 1, 0, 5), None);
        assert_eq!(sample("(", 1, 0, 5), None);
    }
}
