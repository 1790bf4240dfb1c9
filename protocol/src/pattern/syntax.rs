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
    /// `(…)`, `(?<name>…)` (capturing: the group's number, counted by opening parenthesis as
    /// ECMA-262 counts) or `(?:…)` (`None`).
    Group(Box<Node>, Option<u32>),
    /// `(?=…)`, `(?!…)`, `(?<=…)`, `(?<!…)`: backtracking only.
    LookAround(Box<Node>, Look),
    /// `\1`, `\k<name>`: the group's number (a name resolved to it); backtracking only.
    Backreference(u32),
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

/// Which way a lookaround looks, and whether it must fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Look {
    /// `(?<=…)`, `(?<!…)`.
    pub behind: bool,
    /// `(?!…)`, `(?<!…)`.
    pub negated: bool,
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

impl ClassItem {
    /// Whether `c` is one of the characters this item lists.
    pub(crate) fn holds(self, c: char) -> bool {
        match self {
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
        }
    }
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
        groups: 0,
        names: Vec::new(),
        references: Vec::new(),
    };
    let node = parser.alternation(0)?;
    if parser.at != parser.chars.len() {
        return Err(Unsupported);
    }
    // A number beyond the groups is no reference (without the `u` flag it is an octal escape),
    // and a name must be a group's: never guess.
    for reference in &parser.references {
        let known = match reference {
            Reference::Number(n) => *n >= 1 && *n <= parser.groups,
            Reference::Name(name) => parser.names.iter().any(|(n, _)| n == name),
        };
        if !known {
            return Err(Unsupported);
        }
    }
    let number = |placeholder: u32| match &parser.references[(u32::MAX - placeholder) as usize] {
        Reference::Name(name) => parser
            .names
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, number)| *number),
        Reference::Number(n) => *n,
    };
    Ok(resolve(node, &number))
}

/// A backreference as written.
enum Reference {
    Number(u32),
    Name(String),
}

/// Backreferences (parsed as `u32::MAX - k`, the k-th reference) replaced by the number of
/// their group.
fn resolve(node: Node, number: &dyn Fn(u32) -> u32) -> Node {
    let boxed = |inner: Box<Node>| Box::new(resolve(*inner, number));
    match node {
        Node::Backreference(placeholder) => Node::Backreference(number(placeholder)),
        Node::Group(inner, capture) => Node::Group(boxed(inner), capture),
        Node::LookAround(inner, look) => Node::LookAround(boxed(inner), look),
        Node::Repeat {
            inner,
            min,
            max,
            greedy,
        } => Node::Repeat {
            inner: boxed(inner),
            min,
            max,
            greedy,
        },
        Node::Concat(items) => {
            Node::Concat(items.into_iter().map(|i| resolve(i, number)).collect())
        }
        Node::Alternation(items) => {
            Node::Alternation(items.into_iter().map(|i| resolve(i, number)).collect())
        }
        other => other,
    }
}

/// Nesting deeper than this is left to the backtracking engine (which bounds it already).
const MAX_DEPTH: usize = 128;

struct Parser {
    chars: Vec<char>,
    at: usize,
    /// Capturing groups opened so far.
    groups: u32,
    /// Named groups: name and number.
    names: Vec<(String, u32)>,
    /// Every backreference, checked once the groups are all known.
    references: Vec<Reference>,
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
        enum Kind {
            Plain,
            Capture,
            Look(Look),
        }
        let look = |behind, negated| Kind::Look(Look { behind, negated });
        let kind = if self.eat('?') {
            match self.peek() {
                Some(':') => {
                    self.at += 1;
                    Kind::Plain
                }
                Some(c @ ('=' | '!')) => {
                    self.at += 1;
                    look(false, c == '!')
                }
                Some('<') if matches!(self.peek_at(1), Some('=' | '!')) => {
                    let negated = self.peek_at(1) == Some('!');
                    self.at += 2;
                    look(true, negated)
                }
                Some('<') => {
                    // A named group: its name, then its body.
                    self.at += 1;
                    let mut name = String::new();
                    while let Some(c) = self.peek() {
                        self.at += 1;
                        if c == '>' {
                            break;
                        }
                        if !(c.is_alphanumeric() || c == '_' || c == '$') {
                            return Err(Unsupported);
                        }
                        name.push(c);
                    }
                    self.names.push((name, self.groups + 1));
                    Kind::Capture
                }
                _ => return Err(Unsupported),
            }
        } else {
            Kind::Capture
        };
        // Numbered by its opening parenthesis.
        let number = matches!(kind, Kind::Capture).then(|| {
            self.groups += 1;
            self.groups
        });
        let inner = self.alternation(depth + 1)?;
        if !self.eat(')') {
            return Err(Unsupported);
        }
        Ok(match kind {
            Kind::Look(look) => Node::LookAround(Box::new(inner), look),
            _ => Node::Group(Box::new(inner), number),
        })
    }

    /// A backreference, its group's number settled once every group is known.
    fn reference(&mut self, reference: Reference) -> Node {
        self.references.push(reference);
        Node::Backreference(u32::MAX - (self.references.len() as u32 - 1))
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
                let mut number = 0u32;
                while let Some(d) = self.peek().and_then(|c| c.to_digit(10)) {
                    self.at += 1;
                    number = number.saturating_mul(10).saturating_add(d);
                }
                Ok(self.reference(Reference::Number(number)))
            }
            'k' if self.peek_at(1) == Some('<') => {
                self.at += 2;
                let mut name = String::new();
                while let Some(c) = self.peek() {
                    self.at += 1;
                    if c == '>' {
                        break;
                    }
                    name.push(c);
                }
                Ok(self.reference(Reference::Name(name)))
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
        Node::LookAround(..) | Node::Backreference(_) => true,
        Node::Group(inner, _) | Node::Repeat { inner, .. } => needs_backtracking(inner),
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
            Node::Repeat { inner, .. } | Node::Group(inner, _) | Node::LookAround(inner, _) => {
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
        Node::Group(inner, _) | Node::LookAround(inner, _) => nested_quantifier(inner),
        Node::Concat(items) | Node::Alternation(items) => items.iter().any(nested_quantifier),
        _ => false,
    }
}

/// Whether each repetition of `body` starts or ends with a character none of its unbounded
/// repetitions can match (`(-[a-z]+)*`, `([a-z0-9-]+\.)+`): the iterations are then told apart
/// by it, and a value splits into them one way only.
fn delimited(body: &Node) -> bool {
    let body = match body {
        Node::Group(inner, _) => inner.as_ref(),
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
        Node::Repeat { inner, .. } | Node::Group(inner, _) | Node::LookAround(inner, _) => {
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
            let listed = items.iter().any(|item| item.holds(c));
            listed != *negated
        }
        Node::Group(inner, _) | Node::Repeat { inner, .. } | Node::LookAround(inner, _) => {
            can_match(inner, c)
        }
        Node::Concat(items) | Node::Alternation(items) => items.iter().any(|i| can_match(i, c)),
        Node::Backreference(_) => true,
        Node::Empty | Node::Start | Node::End | Node::WordBoundary { .. } => false,
    }
}

/// The tree in the `regex` crate's syntax, with ECMA-262's meanings; `Unsupported` for what only
/// the backtracking engine matches.
pub(crate) fn to_regex(node: &Node) -> Result<String, Unsupported> {
    let mut out = String::new();
    write(node, false, &mut out)?;
    Ok(out)
}

/// The tree in `fancy-regex`'s syntax, with ECMA-262's meanings: lookarounds, capturing groups
/// (numbered as ECMA-262 numbers them) and backreferences as written, the rest as for the
/// `regex` crate, `\b` spelled with lookarounds over ASCII word characters.
pub(crate) fn to_fancy(node: &Node) -> Result<String, Unsupported> {
    let mut out = String::new();
    write(node, true, &mut out)?;
    Ok(out)
}

/// ECMA-262's `\b` and `\B` over ASCII word characters, as lookarounds.
const WORD: &str = "[0-9A-Za-z_]";

fn write(node: &Node, fancy: bool, out: &mut String) -> Result<(), Unsupported> {
    let write = |node: &Node, out: &mut String| write(node, fancy, out);
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
        Node::WordBoundary { negated } if fancy => {
            let (before, after) = if *negated { ("=", "=") } else { ("=", "!") };
            let (other_before, other_after) = if *negated { ("!", "!") } else { ("!", "=") };
            let _ = write!(
                out,
                "(?:(?<{before}{WORD})(?{after}{WORD})|(?<{other_before}{WORD})(?{other_after}{WORD}))"
            );
        }
        Node::WordBoundary { negated } => {
            out.push_str(if *negated { r"(?-u:\B)" } else { r"(?-u:\b)" })
        }
        Node::Group(inner, capture) => {
            out.push_str(if fancy && capture.is_some() {
                "("
            } else {
                "(?:"
            });
            write(inner, out)?;
            out.push(')');
        }
        Node::LookAround(inner, look) if fancy => {
            out.push_str(match (look.behind, look.negated) {
                (false, false) => "(?=",
                (false, true) => "(?!",
                (true, false) => "(?<=",
                (true, true) => "(?<!",
            });
            write(inner, out)?;
            out.push(')');
        }
        Node::Backreference(n) if fancy => {
            let _ = write!(out, r"(?:\{n})");
        }
        Node::LookAround(..) | Node::Backreference(_) => return Err(Unsupported),
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
