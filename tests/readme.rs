//! The README is a user's guide (issue 38): at most 400 lines, and what it
//! leaves out is in docs/, reachable: every link and every `docs/` path it
//! names resolves, and so do the links of the documents under docs/.

mod common;

use common::repo;
use std::path::Path;

const MAX_LINES: usize = 400;

/// The relative link targets of a Markdown text (`](target)`), without the
/// web addresses and the mail links.
fn relative_links(text: &str) -> Vec<String> {
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    link.captures_iter(text)
        .map(|c| c[1].to_string())
        .filter(|t| !t.contains("://") && !t.starts_with("mailto:"))
        .collect()
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces as
/// hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Checks that `target`, relative to `dir`, is an existing file and that its
/// `#anchor` (if any) is one of the file's headings. Returns what is wrong.
fn resolve(dir: &Path, target: &str) -> Option<String> {
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        return None; // a heading of the same file; not used here
    } else {
        dir.join(path)
    };
    if !file.is_file() {
        return Some(format!("{target}: no file {}", file.display()));
    }
    let fragment = fragment?;
    let text = std::fs::read_to_string(&file).unwrap();
    let anchors: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| l.trim_start_matches('#').strip_prefix(' '))
        .map(anchor)
        .collect();
    (!anchors.iter().any(|a| a == fragment))
        .then(|| format!("{target}: no heading #{fragment} in {}", file.display()))
}

#[test]
fn the_readme_is_a_guide_of_at_most_400_lines() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= MAX_LINES,
        "README.md has {lines} lines; at most {MAX_LINES}: move details into docs/"
    );
}

#[test]
fn every_link_and_docs_path_of_the_readme_resolves() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let links = relative_links(&readme);
    assert!(
        links.iter().filter(|l| l.starts_with("docs/")).count() >= 10,
        "the README links into docs/: {links:?}"
    );
    let mut wrong: Vec<String> = links.iter().filter_map(|l| resolve(&repo(""), l)).collect();
    // Paths named in the text (in backticks or plain), not only links.
    let path = regex::Regex::new(r"docs/[A-Za-z0-9_./-]*[A-Za-z0-9_]").unwrap();
    for m in path.find_iter(&readme) {
        if !repo(m.as_str()).exists() {
            wrong.push(format!(
                "{}: named in the text, not in the repository",
                m.as_str()
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn every_link_of_the_docs_resolves() {
    let mut wrong = Vec::new();
    let mut docs = 0;
    for entry in std::fs::read_dir(repo("docs")).unwrap() {
        let file = entry.unwrap().path();
        if file.extension().is_none_or(|e| e != "md") {
            continue;
        }
        docs += 1;
        let text = std::fs::read_to_string(&file).unwrap();
        for link in relative_links(&text) {
            if let Some(w) = resolve(&repo("docs"), &link) {
                wrong.push(format!("{}: {w}", file.display()));
            }
        }
    }
    assert!(docs >= 10, "{docs} documents under docs/");
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// The examples' documentation says of hf_llama.py's `--prewarm-gdn-autotune`
/// what the bundled recording's report says (issue 38, item 8): its variant
/// names no known prewarm, so it is compared but not judged.
#[test]
fn the_examples_doc_says_what_the_hf_llama_recording_says() {
    let report = common::terminal_text(&repo("tests/fixtures/h200/hf-llama-matrix"));
    // The terminal wraps at 100 columns: compare with the spaces folded.
    let report = report.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        report.contains(
            "variant 'gdn_autotune' names no known prewarm (see `prewarm-doctor run --help`): \
             compared, but not judged"
        ),
        "{report}"
    );
    let doc = std::fs::read_to_string(repo("docs/examples.md")).unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `examples/hf_llama.py`"))
        .expect("docs/examples.md has a row for hf_llama.py");
    assert!(row.contains("compared, but not judged"), "{row}");
    assert!(!row.contains("NO EFFECT"), "{row}");
}
