//! Values a pattern matches, generated from its syntax tree: concatenation, alternation,
//! classes, repetition, groups and anchors are walked, with choices drawn from a seed; what the
//! tree does not decide (lookarounds, backreferences, word boundaries) is settled by search, each
//! candidate checked by the compiled pattern before it is returned. Used by `idemgen probe` to
//! send values a server must accept, fresh per request so natural unique keys do not collide.

use super::syntax::{ClassItem, Node};

/// How many candidates are drawn before giving up.
const ATTEMPTS: u32 = 96;

/// Characters a class or `.` is sampled from first: printable, plain in JSON, URLs and headers.
const PLAIN: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~";

/// More characters, for classes that exclude every plain one.
const MORE: &str = " !\"#$%&'()*+,/:;<=>?@[\\]^`{|}\u{e9}\u{df}\u{3b1}\u{4e2d}\t";

/// A small deterministic generator (SplitMix64): the same seed draws the same value.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A value of `min_chars..=max_chars` characters that `regex` (compiled from `tree`) matches,
/// drawn from `seed`; `None` when none was found.
pub(crate) fn sample(
    tree: &Node,
    regex: &super::Regex,
    seed: u64,
    min_chars: usize,
    max_chars: usize,
) -> Option<String> {
    let fits = |s: &str| (min_chars..=max_chars).contains(&s.chars().count());
    let mut draw = Draw(seed);
    let anchored_start = starts_anchored(tree);
    let anchored_end = ends_anchored(tree);
    for attempt in 0..ATTEMPTS {
        // Short repetitions first; later attempts allow longer ones.
        let spread = 1 + u64::from(attempt / 8);
        let mut walk = Walk {
            draw: &mut draw,
            spread,
            groups: Vec::new(),
        };
        let mut candidate = String::new();
        walk.generate(tree, &mut candidate);
        // An unanchored pattern matches anywhere: text around the match keeps it matching.
        let short = min_chars.saturating_sub(candidate.chars().count());
        if short > 0 {
            let pad: String = (0..short)
                .map(|_| plain_char(&mut draw, PLAIN.len() - 4))
                .collect();
            if !anchored_end {
                candidate.push_str(&pad);
            } else if !anchored_start {
                candidate.insert_str(0, &pad);
            }
        }
        if fits(&candidate) && regex.is_match(&candidate) {
            return Some(candidate);
        }
    }
    None
}

/// A plain character among the first `of` of [`PLAIN`].
fn plain_char(draw: &mut Draw, of: usize) -> char {
    let plain: Vec<char> = PLAIN.chars().take(of).collect();
    plain[draw.below(plain.len() as u64) as usize]
}

fn starts_anchored(node: &Node) -> bool {
    match node {
        Node::Start => true,
        Node::Group(inner, _) => starts_anchored(inner),
        Node::Concat(items) => items.first().is_some_and(starts_anchored),
        Node::Alternation(items) => items.iter().all(starts_anchored),
        _ => false,
    }
}

fn ends_anchored(node: &Node) -> bool {
    match node {
        Node::End => true,
        Node::Group(inner, _) => ends_anchored(inner),
        Node::Concat(items) => items.last().is_some_and(ends_anchored),
        Node::Alternation(items) => items.iter().all(ends_anchored),
        _ => false,
    }
}

/// One candidate's walk of the tree.
struct Walk<'d> {
    draw: &'d mut Draw,
    /// How far past its minimum a repetition may go.
    spread: u64,
    /// What each capturing group generated last, by number: a backreference repeats it (the
    /// compiled pattern checks the rest).
    groups: Vec<(u32, String)>,
}

impl Walk<'_> {
    /// Appends one string `node` can match (lookarounds left to the check).
    fn generate(&mut self, node: &Node, out: &mut String) {
        match node {
            Node::Empty
            | Node::Start
            | Node::End
            | Node::WordBoundary { .. }
            | Node::LookAround(..) => {}
            Node::Backreference(n) => {
                if let Some((_, text)) = self.groups.iter().rev().find(|(g, _)| g == n) {
                    out.push_str(&text.clone());
                }
            }
            Node::Literal(c) => out.push(*c),
            Node::Any => out.push(plain_char(self.draw, PLAIN.len())),
            Node::Class { negated, items } => {
                if let Some(c) = class_char(*negated, items, self.draw) {
                    out.push(c);
                }
            }
            Node::Group(inner, capture) => {
                let from = out.len();
                self.generate(inner, out);
                if let Some(n) = capture {
                    self.groups.push((*n, out[from..].to_owned()));
                }
            }
            Node::Concat(items) => {
                for item in items {
                    self.generate(item, out);
                }
            }
            Node::Alternation(items) => {
                if !items.is_empty() {
                    let pick = self.draw.below(items.len() as u64) as usize;
                    self.generate(&items[pick], out);
                }
            }
            Node::Repeat {
                inner, min, max, ..
            } => {
                let min = u64::from(*min);
                let reach = min + 2 * self.spread;
                let max = max.map_or(reach, |m| u64::from(m).min(reach));
                let count = min + self.draw.below(max.saturating_sub(min) + 1);
                for _ in 0..count {
                    self.generate(inner, out);
                }
            }
        }
    }
}

/// A character the class matches: a listed one (a range's plain part first), else, for a negated
/// class or one of sets only, a plain character it accepts.
fn class_char(negated: bool, items: &[ClassItem], draw: &mut Draw) -> Option<char> {
    let accepts = |c: char| items.iter().any(|item| item.holds(c)) != negated;
    if !negated && !items.is_empty() {
        let item = items[draw.below(items.len() as u64) as usize];
        let drawn = match item {
            ClassItem::Char(c) => Some(c),
            ClassItem::Range(a, b) => {
                let plain: Vec<char> = PLAIN.chars().filter(|c| (a..=b).contains(c)).collect();
                if plain.is_empty() {
                    let span = u64::from(b as u32 - a as u32) + 1;
                    char::from_u32(a as u32 + draw.below(span) as u32).filter(|c| accepts(*c))
                } else {
                    Some(plain[draw.below(plain.len() as u64) as usize])
                }
            }
            ClassItem::Set(..) => None,
        };
        if drawn.is_some() {
            return drawn;
        }
    }
    let candidates: Vec<char> = PLAIN
        .chars()
        .chain(MORE.chars())
        .filter(|c| accepts(*c))
        .collect();
    (!candidates.is_empty()).then(|| candidates[draw.below(candidates.len() as u64) as usize])
}
