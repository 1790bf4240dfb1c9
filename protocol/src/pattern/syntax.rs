//! An ECMA-262 pattern's syntax tree, as far as it is needed to match it in linear time: parsed
//! from a pattern `regress` accepted, and written back in the `regex` crate's syntax with
//! ECMA-262's meanings (`.` stops at every line terminator, `\d`, `\w` and `\b` are ASCII, `\s`
//! is ECMA-262's white space). A construct outside that set (lookarounds, backreferences,
//! `\p{…}`, surrogate escapes, anything unusual) makes the pattern [`Unsupported`]: it is then
//! matched by the backtracking engine as before, never misread.

use std::fmt::Write as _;

/// A pattern the linear engine cannot take as it is: matched by the backtracking one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unsupported;

/// A node of the tree.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    /// Matches the empty string.
    Empty,
    /// One character.
    Literal(char),
    /// `.`: any character but a line terminator.
    Any,
    /// `[…]`, `\d`, `\w`, `\s` and their negations.
    Class {
        /// `[^…]`.
        negated: bool,
        /// What it lists.
        items: Vec<ClassItem>,
    },
    /// `^` (no `m` flag: the start of the value).
    Start,
    /// `$` (no `m` flag: the end of the value).
    End,
    /// `\b`, or `\B` when negated.
    WordBoundary {
        /// `\B`.
        negated: bool,
    },
    /// `(…)`, `(?:…)`, `(?<name>…)`.
    Group(Box<Node>),
    /// `(?=…)`, `(?!…)`, `(?<=…)`, `(?<!…)`: backtracking only.
    LookAround(Box<Node>),
    /// `\1`, `\k<name>`: backtracking only.
    Backreference,
    /// One after the other.
    Concat(Vec<Node>),
    /// One of them.
    Alternation(Vec<Node>),
    /// `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`, greedy or lazy.
    Repeat {
        /// What repeats.
        inner: Box<Node>,
        /// At least.
        min: u32,
        /// At most (`None`: unbounded).
        max: Option<u32>,
        /// Not `…?` (lazy).
        greedy: bool,
    },
}

/// What a character class lists.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ClassItem {
    /// One character.
    Char(char),
    /// `a-z`.
    Range(char, char),
    /// `\d`, `\w`, `\s` or a negation of one.
    Set(Set, bool),
}

/// The escapes that stand for a set of characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Set {
    /// `\d`: `0-9`.
    Digit,
    /// `\w`: `A-Za-z0-9_`.
    Word,
    /// `\s`: ECMA-262's WhiteSpace and LineTerminator.
    Space,
}

/// ECMA-262's `\s`: WhiteSpace (TAB, VT, FF, SP, NBSP, ZWNBSP, Zs) and LineTerminator.
const SPACE: &str = r"\t\n\x{0B}\x{0C}\r\x{20}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

/// Parses `source`, a pattern `regress` compiled.
pub(crate) fn parse(source: &str) -> Result<Node, Unsupported> {
    let mut parser = Parser {
        chars: source.chars().collect(),
        at: 0,
    };
    let node = parser.alternation(0)?;
    if parser.at != parser.chars.len() {
        return Err(Unsupported);
    }
    Ok(node)
}

/// Nesting deeper than this is left to the backtracking engine (which bounds it already).
const MAX_DEPTH: usize = 128;

struct Parser {
    chars: Vec<char>,
    at: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn alternation(&mut self, depth: usize) -> Result<Node, Unsupported> {
        if depth > MAX_DEPTH {
            return Err(Unsupported);
        }
        let mut alternatives = vec![self.concat(depth)?];
        while self.eat('|') {
            alternatives.push(self.concat(depth)?);
        }
        Ok(if alternatives.len() == 1 {
            alternatives.pop().unwrap_or(Node::Empty)
        } else {
            Node::Alternation(alternatives)
        })
    }

    fn concat(&mut self, depth: usize) -> Result<Node, Unsupported> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom(depth)?;
            let item = self.quantified(atom)?;
            items.push(item);
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.pop().unwrap_or(Node::Empty),
            _ => Node::Concat(items),
        })
    }

    /// `atom` followed by its quantifier, if any.
    fn quantified(&mut self, atom: Node) -> Result<Node, Unsupported> {
        let (min, max) = match self.peek() {
            Some('*') => {
                self.at += 1;
                (0, None)
            }
            Some('+') => {
                self.at += 1;
                (1, None)
            }
            Some('?') => {
                self.at += 1;
                (0, Some(1))
            }
            Some('{') => match self.braces() {
                Some(bounds) => bounds,
                None => return Ok(atom),
            },
            _ => return Ok(atom),
        };
        if matches!(
            atom,
            Node::Start | Node::End | Node::WordBoundary { .. } | Node::Empty
        ) {
            return Err(Unsupported);
        }
        let greedy = !self.eat('?');
        Ok(Node::Repeat {
            inner: Box::new(atom),
            min,
            max,
            greedy,
        })
    }

    /// `{n}`, `{n,}` or `{n,m}` at the cursor, consumed; `None` (nothing consumed) when the `{`
    /// starts no quantifier, and is a character (Annex B).
    fn braces(&mut self) -> Option<(u32, Option<u32>)> {
        let start = self.at;
        self.at += 1;
        let number = |p: &mut Parser| {
            let from = p.at;
            while p.peek().is_some_and(|c| c.is_ascii_digit()) {
                p.at += 1;
            }
            (p.at > from).then(|| p.chars[from..p.at].iter().collect::<String>())
        };
        let parsed = (|| {
            let min: u32 = number(self)?.parse().ok()?;
            let max = if self.eat(',') {
                match number(self) {
                    Some(max) => Some(max.parse::<u32>().ok()?),
                    None => None,
                }
            } else {
                Some(min)
            };
            self.eat('}').then_some((min, max))
        })();
        if parsed.is_none() {
            self.at = start;
        }
        parsed
    }

    fn atom(&mut self, depth: usize) -> Result<Node, Unsupported> {
        let Some(c) = self.peek() else {
            return Err(Unsupported);
        };
        self.at += 1;
        Ok(match c {
            '^' => Node::Start,
            '$' => Node::End,
            '.' => Node::Any,
            '(' => self.group(depth)?,
            '[' => self.class()?,
            '\\' => self.escape()?,
            // Nothing to repeat: `regress` refused it already; never guess.
            '*' | '+' | '?' => return Err(Unsupported),
            '{' => {
                self.at -= 1;
                if self.braces().is_some() {
                    return Err(Unsupported);
                }
                self.at += 1;
                Node::Literal('{')
            }
            other => Node::Literal(other),
        })
    }

    fn group(&mut self, depth: usize) -> Result<Node, Unsupported> {
        let look = if self.eat('?') {
            match self.peek() {
                Some(':') => {
                    self.at += 1;
                    false
                }
                Some('=' | '!') => {
                    self.at += 1;
                    true
                }
                Some('<') if matches!(self.peek_at(1), Some('=' | '!')) => {
                    self.at += 2;
                    true
                }
                Some('<') => {
                    // A named group: its name, then its body.
                    self.at += 1;
                    while let Some(c) = self.peek() {
                        self.at += 1;
                        if c == '>' {
                            break;
                        }
                        if !(c.is_alphanumeric() || c == '_' || c == '$') {
                            return Err(Unsupported);
                        }
                    }
                    false
                }
                _ => return Err(Unsupported),
            }
        } else {
            false
        };
        let inner = self.alternation(depth + 1)?;
        if !self.eat(')') {
            return Err(Unsupported);
        }
        Ok(if look {
            Node::LookAround(Box::new(inner))
        } else {
            Node::Group(Box::new(inner))
        })
    }

    /// After `\` outside a class.
    fn escape(&mut self) -> Result<Node, Unsupported> {
        let Some(c) = self.peek() else {
            return Err(Unsupported);
        };
        match c {
            'b' | 'B' => {
                self.at += 1;
                Ok(Node::WordBoundary { negated: c == 'B' })
            }
            '1'..='9' => {
                while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                    self.at += 1;
                }
                Ok(Node::Backreference)
            }
            'k' if self.peek_at(1) == Some('<') => {
                while let Some(c) = self.peek() {
                    self.at += 1;
                    if c == '>' {
                        break;
                    }
                }
                Ok(Node::Backreference)
            }
            _ => match self.class_escape()? {
                ClassItem::Set(set, negated) => Ok(Node::Class {
                    negated: false,
                    items: vec![ClassItem::Set(set, negated)],
                }),
                ClassItem::Char(c) => Ok(Node::Literal(c)),
                ClassItem::Range(..) => Err(Unsupported),
            },
        }
    }

    /// After `\`, an escape that is a character or a set (in a class or out of one).
    fn class_escape(&mut self) -> Result<ClassItem, Unsupported> {
        let Some(c) = self.peek() else {
            return Err(Unsupported);
        };
        self.at += 1;
        let set = |set, negated| Ok(ClassItem::Set(set, negated));
        match c {
            'd' => set(Set::Digit, false),
            'D' => set(Set::Digit, true),
            'w' => set(Set::Word, false),
            'W' => set(Set::Word, true),
            's' => set(Set::Space, false),
            'S' => set(Set::Space, true),
            't' => Ok(ClassItem::Char('\t')),
            'n' => Ok(ClassItem::Char('\n')),
            'v' => Ok(ClassItem::Char('\u{0B}')),
            'f' => Ok(ClassItem::Char('\u{0C}')),
            'r' => Ok(ClassItem::Char('\r')),
            '0' if !self.peek().is_some_and(|d| d.is_ascii_digit()) => Ok(ClassItem::Char('\0')),
            'c' => match self.peek() {
                Some(letter) if letter.is_ascii_alphabetic() => {
                    self.at += 1;
                    Ok(ClassItem::Char(char::from(letter as u8 % 32)))
                }
                _ => Err(Unsupported),
            },
            'x' => {
                let value = self.hex(2)?;
                char::from_u32(value)
                    .map(ClassItem::Char)
                    .ok_or(Unsupported)
            }
            'u' => {
                let value = if self.eat('{') {
                    let from = self.at;
                    while self.peek().is_some_and(|d| d.is_ascii_hexdigit()) {
                        self.at += 1;
                    }
                    let digits: String = self.chars[from..self.at].iter().collect();
                    if digits.is_empty() || !self.eat('}') {
                        return Err(Unsupported);
                    }
                    u32::from_str_radix(&digits, 16).map_err(|_| Unsupported)?
                } else {
                    self.hex(4)?
                };
                // A surrogate (half of a pair) is no character of its own.
                char::from_u32(value)
                    .map(ClassItem::Char)
                    .ok_or(Unsupported)
            }
            // Identity escapes: a character that is not a letter or a digit stands for itself.
            other if !other.is_alphanumeric() && other != '_' => Ok(ClassItem::Char(other)),
            _ => Err(Unsupported),
        }
    }

    fn hex(&mut self, digits: usize) -> Result<u32, Unsupported> {
        let text: String = self
            .chars
            .get(self.at..self.at + digits)
            .ok_or(Unsupported)?
            .iter()
            .collect();
        if !text.chars().all(|c| c.is_ascii_hexdigit()) {
            return Err(Unsupported);
        }
        self.at += digits;
        u32::from_str_radix(&text, 16).map_err(|_| Unsupported)
    }

    /// After `[`.
    fn class(&mut self) -> Result<Node, Unsupported> {
        let negated = self.eat('^');
        let mut items = Vec::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(Unsupported);
            };
            if c == ']' {
                self.at += 1;
                break;
            }
            let first = self.class_atom()?;
            if self.peek() == Some('-') && self.peek_at(1).is_some_and(|c| c != ']') {
                self.at += 1;
                let last = self.class_atom()?;
                match (first, last) {
                    (ClassItem::Char(a), ClassItem::Char(b)) if a <= b => {
                        items.push(ClassItem::Range(a, b));
                    }
                    // `[\d-x]` (Annex B: three items) and reversed ranges: never guessed.
                    _ => return Err(Unsupported),
                }
            } else {
                items.push(first);
            }
        }
        // `[]` matches nothing and `[^]` anything: rare enough to leave to the other engine.
        if items.is_empty() {
            return Err(Unsupported);
        }
        Ok(Node::Class { negated, items })
    }

    fn class_atom(&mut self) -> Result<ClassItem, Unsupported> {
        let Some(c) = self.peek() else {
            return Err(Unsupported);
        };
        self.at += 1;
        if c != '\\' {
            return Ok(ClassItem::Char(c));
        }
        match self.peek() {
            Some('b') => {
                self.at += 1;
                Ok(ClassItem::Char('\u{08}'))
            }
            Some('-') => {
                self.at += 1;
                Ok(ClassItem::Char('-'))
            }
            Some('1'..='9') => Err(Unsupported),
            _ => self.class_escape(),
        }
    }
}

/// Whether the tree needs the backtracking engine: a lookaround or a backreference.
pub(crate) fn needs_backtracking(node: &Node) -> bool {
    match node {
        Node::LookAround(_) | Node::Backreference => true,
        Node::Group(inner) | Node::Repeat { inner, .. } => needs_backtracking(inner),
        Node::Concat(items) | Node::Alternation(items) => items.iter().any(needs_backtracking),
        _ => false,
    }
}

/// Whether a repetition without an upper bound holds another one (`(a+)+`, `(\w+\s?)*`): on a
/// backtracking engine, a value that almost matches takes time exponential in its length.
/// Not the only such shape (overlapping alternatives under a repetition, `(a|a)+`, are not
/// told), but the one published specs write.
pub(crate) fn nested_quantifier(node: &Node) -> bool {
    fn unbounded_inside(node: &Node) -> bool {
        match node {
            Node::Repeat { max: None, .. } => true,
            Node::Repeat { inner, .. } | Node::Group(inner) | Node::LookAround(inner) => {
                unbounded_inside(inner)
            }
            Node::Concat(items) | Node::Alternation(items) => items.iter().any(unbounded_inside),
            _ => false,
        }
    }
    match node {
        Node::Repeat {
            inner, max, min, ..
        } => {
            let repeats = max.is_none_or(|max| max > 1 && max != *min);
            (repeats && unbounded_inside(inner) && !delimited(inner)) || nested_quantifier(inner)
        }
        Node::Group(inner) | Node::LookAround(inner) => nested_quantifier(inner),
        Node::Concat(items) | Node::Alternation(items) => items.iter().any(nested_quantifier),
        _ => false,
    }
}

/// Whether each repetition of `body` starts or ends with a character none of its unbounded
/// repetitions can match (`(-[a-z]+)*`, `([a-z0-9-]+\.)+`): the iterations are then told apart
/// by it, and a value splits into them one way only.
fn delimited(body: &Node) -> bool {
    let body = match body {
        Node::Group(inner) => inner.as_ref(),
        other => other,
    };
    let Node::Concat(items) = body else {
        return false;
    };
    let by = |c: char, others: &[Node]| !others.iter().any(|item| unbounded_can_match(item, c));
    match (items.first(), items.last()) {
        (Some(Node::Literal(first)), _) if by(*first, &items[1..]) => true,
        (_, Some(Node::Literal(last))) => by(*last, &items[..items.len() - 1]),
        _ => false,
    }
}

/// Whether an unbounded repetition inside `node` can match `c`.
fn unbounded_can_match(node: &Node, c: char) -> bool {
    match node {
        Node::Repeat {
            inner, max: None, ..
        } => can_match(inner, c),
        Node::Repeat { inner, .. } | Node::Group(inner) | Node::LookAround(inner) => {
            unbounded_can_match(inner, c)
        }
        Node::Concat(items) | Node::Alternation(items) => {
            items.iter().any(|i| unbounded_can_match(i, c))
        }
        _ => false,
    }
}

/// Whether `node` can match a string holding `c` (over-approximated: any part of it).
fn can_match(node: &Node, c: char) -> bool {
    match node {
        Node::Literal(l) => *l == c,
        Node::Any => !matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}'),
        Node::Class { negated, items } => {
            let listed = items.iter().any(|item| match *item {
                ClassItem::Char(x) => x == c,
                ClassItem::Range(a, b) => (a..=b).contains(&c),
                ClassItem::Set(set, negated) => {
                    let member = match set {
                        Set::Digit => c.is_ascii_digit(),
                        Set::Word => c.is_ascii_alphanumeric() || c == '_',
                        Set::Space => c.is_whitespace() || c == '\u{FEFF}',
                    };
                    member != negated
                }
            });
            listed != *negated
        }
        Node::Group(inner) | Node::Repeat { inner, .. } | Node::LookAround(inner) => {
            can_match(inner, c)
        }
        Node::Concat(items) | Node::Alternation(items) => items.iter().any(|i| can_match(i, c)),
        Node::Backreference => true,
        Node::Empty | Node::Start | Node::End | Node::WordBoundary { .. } => false,
    }
}

/// The tree in the `regex` crate's syntax, with ECMA-262's meanings; `Unsupported` for what only
/// the backtracking engine matches.
pub(crate) fn to_regex(node: &Node) -> Result<String, Unsupported> {
    let mut out = String::new();
    write(node, &mut out)?;
    Ok(out)
}

fn write(node: &Node, out: &mut String) -> Result<(), Unsupported> {
    match node {
        Node::Empty => out.push_str("(?:)"),
        Node::Literal(c) => literal(*c, out),
        Node::Any => out.push_str(r"[^\n\r\x{2028}\x{2029}]"),
        Node::Class { negated, items } => {
            out.push('[');
            if *negated {
                out.push('^');
            }
            for item in items {
                match *item {
                    ClassItem::Char(c) => literal(c, out),
                    ClassItem::Range(a, b) => {
                        literal(a, out);
                        out.push('-');
                        literal(b, out);
                    }
                    ClassItem::Set(set, negated) => {
                        out.push('[');
                        if negated {
                            out.push('^');
                        }
                        out.push_str(match set {
                            Set::Digit => "0-9",
                            Set::Word => "0-9A-Za-z_",
                            Set::Space => SPACE,
                        });
                        out.push(']');
                    }
                }
            }
            out.push(']');
        }
        Node::Start => out.push('^'),
        Node::End => out.push('$'),
        Node::WordBoundary { negated } => {
            out.push_str(if *negated { r"(?-u:\B)" } else { r"(?-u:\b)" })
        }
        Node::Group(inner) => {
            out.push_str("(?:");
            write(inner, out)?;
            out.push(')');
        }
        Node::LookAround(_) | Node::Backreference => return Err(Unsupported),
        Node::Concat(items) => {
            for item in items {
                write(item, out)?;
            }
        }
        Node::Alternation(items) => {
            out.push_str("(?:");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                write(item, out)?;
            }
            out.push(')');
        }
        Node::Repeat {
            inner,
            min,
            max,
            greedy,
        } => {
            out.push_str("(?:");
            write(inner, out)?;
            out.push(')');
            let _ = match max {
                Some(max) => write!(out, "{{{min},{max}}}"),
                None => write!(out, "{{{min},}}"),
            };
            if !greedy {
                out.push('?');
            }
        }
    }
    Ok(())
}

/// A character as the `regex` crate reads it literally, in a class or out of one.
fn literal(c: char, out: &mut String) {
    if c.is_ascii_alphanumeric() {
        out.push(c);
    } else {
        let _ = write!(out, r"\x{{{:X}}}", c as u32);
    }
}
