//! Loads an OpenAPI document, with every file it reaches through relative `$ref`s, into trees
//! that keep the source position of every node and key.
//!
//! The loader reads and parses each file once, checks that the root is OpenAPI 3.0 or 3.1, and
//! validates every `$ref` in every file it read (target file readable, pointer present, no chain
//! of references that loops back on itself). Problems are collected, not returned at the first:
//! a [`LoadError`] lists them all. A [`LoadedSpec`] therefore only holds resolvable references,
//! and [`LoadedSpec::deref`] can follow them without failing.
//!
//! References are kept, not inlined: a consumer that needs a schema's name (the code generator)
//! asks [`LoadedSpec::ref_target`], and recursive schemas stay finite.

pub mod json;
pub mod node;
pub mod pointer;
pub mod source;
pub mod yaml;

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

pub use node::{Key, Map, Node, Value};
pub use source::{FileId, Pos, SourceFile, SourceMap, Span};

/// How many `$ref`s a chain may hop through before it is reported as too long.
const MAX_REF_CHAIN: usize = 64;

/// Reads files for the loader. [`RealFs`] reads the disk; [`MemoryFs`] serves tests and tools
/// that hold a spec in memory.
pub trait FileSystem {
    /// Reads the file at `path` as UTF-8 text.
    fn read_to_string(&self, path: &Path) -> io::Result<String>;
    /// A canonical form of `path`, used to recognise one file reached by two different paths.
    fn canonical(&self, path: &Path) -> PathBuf;
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

impl FileSystem for RealFs {
    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        let bytes = std::fs::read(path)?;
        String::from_utf8(bytes)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "the file is not UTF-8 text"))
    }

    fn canonical(&self, path: &Path) -> PathBuf {
        std::fs::canonicalize(path).unwrap_or_else(|_| normalize(path))
    }
}

/// An in-memory file system: paths are normalised lexically, nothing touches the disk.
#[derive(Debug, Clone, Default)]
pub struct MemoryFs {
    files: HashMap<PathBuf, String>,
}

impl MemoryFs {
    /// An empty file system.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a file.
    pub fn insert(&mut self, path: impl AsRef<Path>, text: impl Into<String>) {
        self.files.insert(normalize(path.as_ref()), text.into());
    }
}

impl FileSystem for MemoryFs {
    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        self.files
            .get(&normalize(path))
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "No such file or directory"))
    }

    fn canonical(&self, path: &Path) -> PathBuf {
        normalize(path)
    }
}

/// Removes `.` components and folds `dir/..` pairs, without touching the file system.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out: Vec<Component<'_>> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(c),
            },
            _ => out.push(c),
        }
    }
    if out.is_empty() {
        return PathBuf::from(".");
    }
    out.iter().collect()
}

/// The OpenAPI version family of a loaded document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenApiVersion {
    /// OpenAPI 3.0.x.
    V3_0,
    /// OpenAPI 3.1.x.
    V3_1,
}

/// A node together with the file it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct NodeRef<'a> {
    /// The file the node is written in.
    pub file: FileId,
    /// The node.
    pub node: &'a Node,
}

/// Where a `$ref` points: a file and a JSON pointer within it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RefTarget {
    /// The file.
    pub file: FileId,
    /// The JSON pointer within the file (empty for the whole file).
    pub pointer: String,
}

impl RefTarget {
    /// The last token of the pointer (`Widget` for `#/components/schemas/Widget`), if any.
    pub fn name(&self) -> Option<String> {
        pointer::tokens(&self.pointer).and_then(|t| t.last().cloned())
    }
}

/// One reason a spec could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong, as a sentence.
    pub message: String,
    /// Where, when the problem is inside a file that was read.
    pub location: Option<(FileId, Span)>,
    /// How to fix it, when there is something useful to say.
    pub help: Option<String>,
}

/// The spec could not be loaded; every problem found is listed.
#[derive(Debug, Clone)]
pub struct LoadError {
    /// The files read before and while finding the problems, for code frames.
    pub sources: SourceMap,
    /// The problems, in the order found.
    pub problems: Vec<Problem>,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            match p
                .location
                .and_then(|(file, span)| self.sources.get(file).map(|s| (s.display_path(), span)))
            {
                Some((path, span)) => write!(
                    f,
                    "{path}:{}:{}: {}",
                    span.start.line, span.start.col, p.message
                )?,
                None => write!(f, "{}", p.message)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for LoadError {}

/// A loaded spec: every file reached from the root, parsed, with all references valid.
#[derive(Debug, Clone)]
pub struct LoadedSpec {
    sources: SourceMap,
    documents: Vec<Node>,
    /// The file each (referring file, file part of a `$ref`) pair names.
    links: HashMap<(FileId, String), FileId>,
    root: FileId,
    version: OpenApiVersion,
    version_text: String,
    /// References that do not resolve (dangling, cyclic, remote, unreadable file), each at its
    /// `$ref`: the spec loads anyway, and `check` reports them as findings.
    ref_problems: Vec<Problem>,
}

/// Loads the spec at `path` from the disk.
pub fn load(path: &Path) -> Result<LoadedSpec, LoadError> {
    load_with(&RealFs, path)
}

/// Loads the spec at `path` through `fs`.
pub fn load_with(fs: &dyn FileSystem, path: &Path) -> Result<LoadedSpec, LoadError> {
    Loader {
        fs,
        sources: SourceMap::default(),
        documents: Vec::new(),
        by_path: HashMap::new(),
        links: HashMap::new(),
        problems: Vec::new(),
        ref_problems: Vec::new(),
    }
    .run(path)
}

struct Loader<'f> {
    fs: &'f dyn FileSystem,
    sources: SourceMap,
    /// Parsed documents by file id; `None` for a file that did not parse.
    documents: Vec<Option<Node>>,
    by_path: HashMap<PathBuf, FileId>,
    links: HashMap<(FileId, String), FileId>,
    /// Problems that stop the load (a file that does not parse, not OpenAPI).
    problems: Vec<Problem>,
    /// References that do not resolve: reported as findings of `unresolved-ref`.
    ref_problems: Vec<Problem>,
}

/// A `$ref` written somewhere in a file.
struct RefSite {
    file: FileId,
    span: Span,
    reference: String,
}

impl Loader<'_> {
    fn run(mut self, path: &Path) -> Result<LoadedSpec, LoadError> {
        let display = normalize(path);
        let text = match self.fs.read_to_string(path) {
            Ok(t) => t,
            Err(e) => {
                self.problems.push(Problem {
                    message: format!("cannot read `{}`: {e}", source::display_path(&display)),
                    location: None,
                    help: None,
                });
                return Err(self.into_error());
            }
        };
        let root = self.add_file(display, path.to_path_buf(), text);
        let (version, version_text) = match self.check_version(root) {
            Some(v) => v,
            None => return Err(self.into_error()),
        };

        let mut sites = Vec::new();
        let mut queue = VecDeque::from([root]);
        while let Some(file) = queue.pop_front() {
            for site in self.collect_refs(file) {
                if let Some(target) = self.load_ref_file(&site) {
                    queue.push_back(target);
                }
                sites.push(site);
            }
        }

        // Every phase reports: references are checked even when a file failed to parse, except
        // those into the files that failed.
        let unparsed: HashSet<FileId> = (0..self.documents.len())
            .filter(|&i| self.documents[i].is_none())
            .map(FileId)
            .collect();
        let documents: Vec<Node> = self
            .documents
            .into_iter()
            .map(|d| {
                d.unwrap_or(Node {
                    value: Value::Null,
                    span: Span::default(),
                })
            })
            .collect();
        let mut spec = LoadedSpec {
            sources: self.sources,
            documents,
            links: self.links,
            root,
            version,
            version_text,
            ref_problems: self.ref_problems,
        };
        for site in &sites {
            // A reference into a file that was not loaded (remote, unreadable) was reported when
            // reading it; one into a file that did not parse has nothing to resolve against.
            match spec.ref_target(site.file, &site.reference) {
                Ok(target) if unparsed.contains(&target.file) => continue,
                Err(_) => continue,
                Ok(_) => {}
            }
            if let Err(message) = spec.check_chain(site.file, &site.reference) {
                spec.ref_problems.push(Problem {
                    message,
                    location: Some((site.file, site.span)),
                    help: None,
                });
            }
        }
        if self.problems.is_empty() {
            Ok(spec)
        } else {
            // Fatal: a file that does not parse. The reference problems found anyway come along.
            let mut problems = self.problems;
            problems.append(&mut spec.ref_problems);
            Err(LoadError {
                sources: spec.sources,
                problems,
            })
        }
    }

    fn into_error(self) -> LoadError {
        LoadError {
            sources: self.sources,
            problems: self.problems,
        }
    }

    fn add_file(&mut self, display: PathBuf, path: PathBuf, text: String) -> FileId {
        let canonical = self.fs.canonical(&path);
        let (format, parsed) = if is_json(&path) {
            ("JSON", json::parse(&text))
        } else {
            ("YAML", yaml::parse(&text))
        };
        let id = self.sources.add(SourceFile::new(display, path, text));
        self.by_path.insert(canonical, id);
        match parsed {
            Ok(node) => self.documents.push(Some(node)),
            Err(e) => {
                self.documents.push(None);
                self.problems.push(Problem {
                    message: format!("invalid {format}: {}", e.message),
                    location: Some((
                        id,
                        Span {
                            start: e.pos,
                            end: e.pos,
                        },
                    )),
                    help: None,
                });
            }
        }
        id
    }

    fn document(&self, file: FileId) -> Option<&Node> {
        self.documents.get(file.0).and_then(Option::as_ref)
    }

    fn check_version(&mut self, root: FileId) -> Option<(OpenApiVersion, String)> {
        let result = check_version(self.document(root)?, root);
        match result {
            Ok(v) => Some(v),
            Err(p) => {
                self.problems.push(p);
                None
            }
        }
    }

    fn collect_refs(&self, file: FileId) -> Vec<RefSite> {
        let mut sites = Vec::new();
        if let Some(doc) = self.document(file) {
            references(doc, &mut |node, reference| {
                sites.push(RefSite {
                    file,
                    span: node.span,
                    reference: reference.to_owned(),
                });
            });
        }
        sites
    }

    /// Reads the file a reference names, if it is another file not read yet. Returns the id of a
    /// newly read file.
    fn load_ref_file(&mut self, site: &RefSite) -> Option<FileId> {
        let (file_part, _) = split_reference(&site.reference);
        if file_part.is_empty() {
            return None;
        }
        if is_remote(file_part) {
            self.ref_problems.push(Problem {
                message: format!("remote reference `{}` is not supported", site.reference),
                location: Some((site.file, site.span)),
                help: Some("download the document and refer to it by a relative path".into()),
            });
            return None;
        }
        let relative = PathBuf::from(percent_decode(file_part));
        let from = self.sources.file(site.file);
        let path = sibling(&from.path, &relative);
        let display = normalize(&sibling(&from.display, &relative));
        let canonical = self.fs.canonical(&path);
        if let Some(&known) = self.by_path.get(&canonical) {
            self.links.insert((site.file, file_part.to_string()), known);
            return None;
        }
        match self.fs.read_to_string(&path) {
            Ok(text) => {
                let id = self.add_file(display, path, text);
                self.links.insert((site.file, file_part.to_string()), id);
                Some(id)
            }
            Err(e) => {
                self.ref_problems.push(Problem {
                    message: format!(
                        "cannot read `{}` referenced by `{}`: {e}",
                        source::display_path(&display),
                        site.reference
                    ),
                    location: Some((site.file, site.span)),
                    help: None,
                });
                None
            }
        }
    }
}

/// Keys whose values are data, not OpenAPI or JSON Schema structure: a `$ref` inside an example or
/// a default value is part of the value (Square's examples hold JSON documents that use `$ref`).
pub(crate) fn is_data_key(key: &str) -> bool {
    matches!(key, "example" | "default" | "enum" | "const") || key.starts_with("x-")
}

/// Keys whose values are maps from names (property names, status codes, media types, component
/// names, paths) to objects, or to strings and lists (discriminator `mapping`, OAuth `scopes`,
/// `dependentRequired`): there the keys are names, so a property called `example` or `default`
/// is a schema like any other, and a discriminator value `$ref` is not a reference.
pub(crate) fn is_name_map_key(key: &str) -> bool {
    matches!(
        key,
        "properties"
            | "patternProperties"
            | "dependentSchemas"
            | "dependentRequired"
            | "mapping"
            | "scopes"
            | "$defs"
            | "definitions"
            | "schemas"
            | "responses"
            | "parameters"
            | "requestBodies"
            | "headers"
            | "securitySchemes"
            | "links"
            | "callbacks"
            | "pathItems"
            | "paths"
            | "webhooks"
            | "content"
            | "encoding"
            | "variables"
    )
}

/// Calls `visit` with every `$ref` of the document that is a reference, skipping data: values of
/// `example`, `default`, `enum`, `const` and `x-` extensions, the `value` of Example Objects, and
/// JSON Schema `examples` arrays. The walk keeps its own stack (documents can be deep).
fn references<'a>(doc: &'a Node, visit: &mut impl FnMut(&'a Node, &'a str)) {
    /// How the keys of a map are to be read.
    #[derive(Clone, Copy)]
    enum Keys {
        /// OpenAPI / JSON Schema keywords.
        Keywords,
        /// Names of things (each value an object of keywords).
        Names,
        /// The `examples` of a Media Type or Parameter: names of Example Objects.
        Examples,
        /// A `content` map: media types, or a Reference Object written in its place (not
        /// OpenAPI, but published: the map is then the referenced one, as Spectral reads it).
        Content,
    }
    let mut stack: Vec<(&'a Node, Keys)> = vec![(doc, Keys::Keywords)];
    while let Some((node, keys)) = stack.pop() {
        match (&node.value, keys) {
            // Children are pushed in reverse, so that references are visited in document order.
            (Value::Seq(items), _) => {
                stack.extend(items.iter().rev().map(|item| (item, Keys::Keywords)));
            }
            (Value::Map(map), Keys::Content) if node.ref_target().is_some() => {
                if let Some((_, reference)) = map.entry("$ref")
                    && let Value::Str(r) = &reference.value
                {
                    visit(reference, r);
                }
            }
            (Value::Map(map), Keys::Names | Keys::Content) => {
                stack.extend(map.entries().iter().rev().map(|(_, v)| (v, Keys::Keywords)));
            }
            (Value::Map(map), Keys::Examples) => {
                for (_, example) in map.entries() {
                    // An Example Object's `value` is data; the object may be a reference.
                    if let Some((_, reference)) = example.entry("$ref")
                        && let Value::Str(r) = &reference.value
                    {
                        visit(reference, r);
                    }
                }
            }
            (Value::Map(map), Keys::Keywords) => {
                let mut children = Vec::new();
                for (key, value) in map.entries() {
                    let key = key.text.as_str();
                    match (key, &value.value) {
                        ("$ref", Value::Str(r)) => visit(value, r),
                        _ if is_data_key(key) => {}
                        // 3.1 schemas: an array of examples is data; a map is Example Objects.
                        ("examples", Value::Seq(_)) => {}
                        ("examples", Value::Map(_)) => children.push((value, Keys::Examples)),
                        ("content", _) => children.push((value, Keys::Content)),
                        _ if is_name_map_key(key) => children.push((value, Keys::Names)),
                        _ => children.push((value, Keys::Keywords)),
                    }
                }
                stack.extend(children.into_iter().rev());
            }
            _ => {}
        }
    }
}

/// Checks that `doc` is an OpenAPI 3.0 or 3.1 document.
fn check_version(doc: &Node, root: FileId) -> Result<(OpenApiVersion, String), Problem> {
    let problem = |message: String, span: Span, help: Option<&str>| Problem {
        message,
        location: Some((root, span)),
        help: help.map(str::to_string),
    };
    let Some(map) = doc.as_map() else {
        return Err(problem(
            format!(
                "not an OpenAPI document: expected a mapping with an `openapi` field, found {}",
                doc.kind_name()
            ),
            doc.span,
            None,
        ));
    };
    if let Some((key, _)) = map.entry("swagger") {
        return Err(problem(
            "Swagger 2.0 documents are not supported: idemgen reads OpenAPI 3.0 and 3.1".into(),
            key.span,
            Some("convert the document to OpenAPI 3 first, for example with `swagger2openapi`"),
        ));
    }
    let Some(value) = map.get("openapi") else {
        let start = Pos { line: 1, col: 1 };
        return Err(problem(
            "not an OpenAPI document: the root has no `openapi` field".into(),
            Span { start, end: start },
            Some(
                "an OpenAPI 3 document starts with\n\nopenapi: 3.1.0\ninfo:\n  title: My API\n  version: 1.0.0",
            ),
        ));
    };
    let Some(text) = value.as_str() else {
        return Err(problem(
            format!(
                "`openapi` must be a string such as \"3.1.0\", found {}",
                value.kind_name()
            ),
            value.span,
            Some("quote the version:\n\nopenapi: \"3.1.0\""),
        ));
    };
    if text == "3.0" || text.starts_with("3.0.") {
        Ok((OpenApiVersion::V3_0, text.to_string()))
    } else if text == "3.1" || text.starts_with("3.1.") {
        Ok((OpenApiVersion::V3_1, text.to_string()))
    } else {
        Err(problem(
            format!("unsupported OpenAPI version `{text}`: idemgen reads 3.0.x and 3.1.x"),
            value.span,
            None,
        ))
    }
}

/// Whether `path` names a JSON file (`.json`, any case), read with the JSON parser; every other
/// file is read as YAML.
fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// `relative` resolved against the directory of `file`.
fn sibling(file: &Path, relative: &Path) -> PathBuf {
    match file.parent() {
        Some(dir) => dir.join(relative),
        None => relative.to_path_buf(),
    }
}

/// Splits `file.yaml#/a/b` into (`file.yaml`, `/a/b`); the fragment may be absent.
fn split_reference(reference: &str) -> (&str, &str) {
    match reference.split_once('#') {
        Some((file, fragment)) => (file, fragment),
        None => (reference, ""),
    }
}

fn is_remote(file_part: &str) -> bool {
    file_part.contains("://") || file_part.starts_with("urn:")
}

/// Decodes `%XX` escapes; invalid escapes are kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            if let Some(b) = hex {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| text.to_string())
}

impl LoadedSpec {
    /// The files of the spec, for positions and code frames.
    pub fn sources(&self) -> &SourceMap {
        &self.sources
    }

    /// The root document.
    pub fn root(&self) -> NodeRef<'_> {
        NodeRef {
            file: self.root,
            node: self.document(self.root).unwrap_or(&self.documents[0]),
        }
    }

    /// The id of the root file.
    pub fn root_file(&self) -> FileId {
        self.root
    }

    /// The document of `file`.
    pub fn document(&self, file: FileId) -> Option<&Node> {
        self.documents.get(file.0)
    }

    /// The OpenAPI version family.
    pub fn version(&self) -> OpenApiVersion {
        self.version
    }

    /// The `openapi` field as written, e.g. `3.1.0`.
    pub fn version_text(&self) -> &str {
        &self.version_text
    }

    /// Where `reference`, written in `from`, points.
    pub fn ref_target(&self, from: FileId, reference: &str) -> Result<RefTarget, String> {
        let (file_part, fragment) = split_reference(reference);
        let file = if file_part.is_empty() {
            from
        } else {
            *self
                .links
                .get(&(from, file_part.to_string()))
                .ok_or_else(|| format!("`{file_part}` was not loaded"))?
        };
        Ok(RefTarget {
            file,
            pointer: percent_decode(fragment),
        })
    }

    /// The references that do not resolve, each at its `$ref` (reported by `check` as findings).
    pub fn ref_problems(&self) -> &[Problem] {
        &self.ref_problems
    }

    /// A name for what `target` points at: the last pointer token (`Widget` of
    /// `#/components/schemas/Widget`); for a whole file (`schemas/PaymentRequest.yaml`) the
    /// document's `title`, else the file's stem.
    pub fn target_name(&self, target: &RefTarget) -> Option<String> {
        if let Some(name) = target.name() {
            return Some(name);
        }
        let title = self
            .document(target.file)
            .and_then(|d| d.get("title"))
            .and_then(Node::as_str)
            .filter(|t| !t.trim().is_empty());
        if let Some(title) = title {
            return Some(title.to_owned());
        }
        let file = self.sources.file(target.file);
        file.display
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
    }

    /// Follows one `$ref` written in `from`.
    pub fn resolve_ref(&self, from: FileId, reference: &str) -> Result<NodeRef<'_>, String> {
        let target = self.ref_target(from, reference)?;
        let doc = self
            .document(target.file)
            .ok_or_else(|| format!("`{reference}` points to a file that was not loaded"))?;
        let node = pointer::lookup(doc, &target.pointer).ok_or_else(|| {
            let file = self.sources.file(target.file).display_path();
            format!(
                "`{reference}` does not resolve: `{file}` has nothing at `#{}`",
                target.pointer
            )
        })?;
        Ok(NodeRef {
            file: target.file,
            node,
        })
    }

    /// Follows `$ref`s from `at` until a node that is not a Reference Object.
    ///
    /// Every reference was validated at load time, so this cannot fail; should a chain be broken
    /// anyway, the last node reached is returned.
    pub fn deref<'a>(&'a self, at: NodeRef<'a>) -> NodeRef<'a> {
        let mut current = at;
        for _ in 0..MAX_REF_CHAIN {
            let Some(reference) = current.node.ref_target() else {
                return current;
            };
            match self.resolve_ref(current.file, reference) {
                Ok(next) => current = next,
                Err(_) => return current,
            }
        }
        current
    }

    /// The JSON pointer of the node or key at `span` in `file`.
    pub fn pointer_of(&self, file: FileId, span: Span) -> String {
        match self.document(file) {
            Some(doc) => pointer::pointer_at(doc, span),
            None => String::new(),
        }
    }

    /// Checks that the chain starting with `reference` in `from` resolves and does not loop.
    fn check_chain(&self, from: FileId, reference: &str) -> Result<(), String> {
        let mut seen: HashSet<RefTarget> = HashSet::new();
        let mut chain = vec![reference.to_string()];
        let mut file = from;
        let mut reference = reference.to_string();
        loop {
            let target = self.ref_target(file, &reference)?;
            if pointer::tokens(&target.pointer).is_none() {
                return Err(format!(
                    "`{reference}` has an invalid JSON pointer fragment: it must be empty or start with `/`"
                ));
            }
            if !seen.insert(target.clone()) {
                return Err(format!("cyclic $ref: {}", chain.join(" -> ")));
            }
            let next = self.resolve_ref(file, &reference)?;
            match next.node.ref_target() {
                Some(r) => {
                    chain.push(r.to_string());
                    if chain.len() > MAX_REF_CHAIN {
                        return Err(format!("$ref chain longer than {MAX_REF_CHAIN} hops"));
                    }
                    reference = r.to_string();
                    file = next.file;
                }
                None => return Ok(()),
            }
        }
    }
}
