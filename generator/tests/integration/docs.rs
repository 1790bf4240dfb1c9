//! Every relative link in the repository's Markdown files points at a file or directory that
//! exists (anchors and external links are not checked).

use std::path::{Path, PathBuf};

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || name == "target" || name == "node_modules" {
            continue;
        }
        if path.is_dir() {
            markdown_files(&path, out);
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// The targets of `[text](target)` links in `text`, outside code.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("](") {
            let after = &rest[start + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

#[test]
fn relative_links_in_markdown_resolve() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    assert!(files.len() >= 5, "found the docs: {files:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for link in links(&text) {
            let target = link.split('#').next().unwrap_or("").trim();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let resolved = file.parent().unwrap().join(target);
            if !resolved.exists() {
                broken.push(format!(
                    "{}: {link}",
                    file.strip_prefix(root).unwrap().display()
                ));
            }
        }
    }
    assert_eq!(broken, Vec::<String>::new(), "broken relative links");
    assert!(
        checked >= 5,
        "only {checked} relative links found: is the parser right?"
    );
}

/// Process words in `line`: an issue number (`issue 27`, `issues 25 and 27`, `#27`) or a
/// review, which belong in git history, not in docs that say what is.
fn process_words(line: &str) -> Vec<String> {
    let lower = line.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '#' || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let mut found = Vec::new();
    for (i, word) in words.iter().enumerate() {
        let next_is_number = words
            .get(i + 1)
            .map(|n| n.trim_start_matches('#'))
            .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
        if (*word == "issue" || *word == "issues") && next_is_number {
            found.push(format!("{word} {}", words[i + 1]));
        }
        if word.starts_with("review") {
            found.push((*word).to_owned());
        }
        if word.len() > 1 && word.starts_with('#') && word[1..].chars().all(|c| c.is_ascii_digit())
        {
            found.push((*word).to_owned());
        }
    }
    found
}

#[test]
fn docs_say_what_is_without_issue_numbers_or_reviews() {
    assert_eq!(
        process_words("as in issue 27 (review of #12); issues 25 and 27"),
        ["issue 27", "review", "#12", "issues 25"]
    );
    assert!(process_words("the issue is a 32-byte key; 25 issues; # 1").is_empty());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    markdown_files(root, &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("ARCHITECTURE.md")),
        "{files:?}"
    );
    let mut seen = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for word in process_words(line) {
                let name = file.strip_prefix(root).unwrap().display();
                seen.push(format!("{name}:{}: {word}", n + 1));
            }
        }
    }
    assert_eq!(seen, Vec::<String>::new(), "history belongs in git");
}
