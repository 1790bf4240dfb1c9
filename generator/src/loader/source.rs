//! Source files and positions: what a diagnostic needs to say `file:line:col` and show the line.

use std::path::{Path, PathBuf};

/// A position in a source file. Lines and columns count from 1; columns count Unicode scalar
/// values (characters), as SARIF's `unicodeCodePoints` column kind does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Pos {
    /// The line, from 1.
    pub line: u32,
    /// The column in characters, from 1.
    pub col: u32,
}

/// A range in a source file: `start` inclusive, `end` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span {
    /// The first character of the range.
    pub start: Pos,
    /// The position just past the range.
    pub end: Pos,
}

impl Span {
    /// Whether `other` lies within this span.
    pub fn contains(&self, other: Span) -> bool {
        self.start <= other.start && other.end <= self.end
    }
}

/// Identifies one file of a loaded spec; an index into [`SourceMap`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId(pub(crate) usize);

/// One file read by the loader.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path as the user gave it (for the root) or as reached from it through `$ref`s,
    /// normalised lexically; this is what diagnostics print.
    pub display: PathBuf,
    /// The path used to read the file.
    pub path: PathBuf,
    /// The file's text.
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// Wraps a file's text.
    pub fn new(display: PathBuf, path: PathBuf, text: String) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        SourceFile {
            display,
            path,
            text,
            line_starts,
        }
    }

    /// The text of line `line` (from 1) without its line terminator, if the file has it.
    pub fn line(&self, line: u32) -> Option<&str> {
        let index = usize::try_from(line).ok()?.checked_sub(1)?;
        let start = *self.line_starts.get(index)?;
        let end = self
            .line_starts
            .get(index + 1)
            .copied()
            .unwrap_or(self.text.len());
        let text = self.text.get(start..end)?;
        Some(text.trim_end_matches(['\n', '\r']))
    }

    /// The path to print, with `/` separators on every platform.
    pub fn display_path(&self) -> String {
        display_path(&self.display)
    }
}

/// Renders a path with `/` separators so that output is the same on every platform.
pub fn display_path(path: &Path) -> String {
    path.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
        .replace("//", "/")
}

/// All files of a loaded spec, indexed by [`FileId`].
#[derive(Debug, Clone, Default)]
pub struct SourceMap {
    files: Vec<SourceFile>,
}

impl SourceMap {
    /// Adds a file and returns its id.
    pub fn add(&mut self, file: SourceFile) -> FileId {
        self.files.push(file);
        FileId(self.files.len() - 1)
    }

    /// The file with id `id`.
    ///
    /// Ids are only made by [`SourceMap::add`], so every id of this map is valid; an id from
    /// another map falls back to the first file rather than panicking.
    pub fn file(&self, id: FileId) -> &SourceFile {
        match self.files.get(id.0) {
            Some(f) => f,
            None => &self.files[0],
        }
    }

    /// The file with id `id`, if it exists.
    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0)
    }

    /// All files, in the order they were read.
    pub fn files(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files.iter().enumerate().map(|(i, f)| (FileId(i), f))
    }
}
