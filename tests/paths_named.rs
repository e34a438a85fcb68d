//! Every repository path named in ARCHITECTURE.md and in the code's comments
//! exists (issue 39: comments and pages had kept naming files that no longer
//! did). A path is a word that starts with one of the repository's top
//! folders and names a file (it has an extension) or a folder (it ends in
//! `/`); `*`, `{`, `<` and `%` mark patterns and placeholders, which are left
//! out.

mod common;

use common::repo;
use std::path::{Path, PathBuf};

const ROOTS: [&str; 9] = [
    "src/",
    "crates/",
    "tests/",
    "docs/",
    "scripts/",
    "benches/",
    "examples/",
    "templates/",
    "reports/",
];

/// The repository paths a text names.
fn paths_in(text: &str) -> Vec<String> {
    let word = regex::Regex::new(r"[A-Za-z0-9_./\-]+").unwrap();
    word.find_iter(text)
        .map(|m| {
            m.as_str()
                .trim_end_matches(['.', ',', ':', ')'])
                .to_string()
        })
        .filter(|w| ROOTS.iter().any(|r| w.starts_with(r)))
        .filter(|w| {
            let last = w.rsplit('/').next().unwrap_or("");
            w.ends_with('/') || last.contains('.')
        })
        .filter(|w| {
            let end = text
                .find(w.as_str())
                .map(|i| text[i + w.len()..].chars().next());
            !matches!(end, Some(Some('*' | '{' | '<' | '%')))
        })
        .collect()
}

fn missing(paths: Vec<String>) -> Vec<String> {
    paths.into_iter().filter(|p| !repo(p).exists()).collect()
}

fn files_under(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            if !p.ends_with("fixtures") && !p.ends_with("target") {
                files_under(&p, ext, out);
            }
        } else if p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

#[test]
fn every_path_architecture_md_names_exists() {
    let text = std::fs::read_to_string(repo("ARCHITECTURE.md")).unwrap();
    let named = paths_in(&text);
    assert!(named.len() > 10, "{named:?}");
    assert_eq!(missing(named), Vec::<String>::new());
}

#[test]
fn every_path_a_comment_names_exists() {
    let mut files = Vec::new();
    for (dir, ext) in [
        ("src", "rs"),
        ("crates", "rs"),
        ("tests", "rs"),
        ("src/shim", "py"),
    ] {
        files_under(&repo(dir), ext, &mut files);
    }
    let mut bad = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let comments: String = text
            .lines()
            .filter_map(|l| {
                let t = l.trim_start();
                t.starts_with("//")
                    .then_some(t)
                    .or_else(|| t.starts_with('#').then_some(t))
            })
            .collect::<Vec<_>>()
            .join("\n");
        for p in missing(paths_in(&comments)) {
            bad.push(format!("{}: {p}", f.display()));
        }
    }
    assert_eq!(bad, Vec::<String>::new());
}
