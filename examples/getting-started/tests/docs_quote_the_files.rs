//! The README and the book under docs/ show code and configuration that CI builds and
//! loads, so they cannot drift: each quoted block follows a marker line
//! `<!-- quote: PATH -->` (PATH from the repository root) and must equal that file.
//! Every quote of README.md and of every docs/*.md is checked, so a chapter added later
//! is covered without a line here; the pages that must quote particular files say so
//! below. A block that no longer matches fails here; `python3 scripts/sync_quotes.py`
//! copies the files into their blocks (`--check` lists the stale ones).

use std::path::{Path, PathBuf};

/// The repository root (this crate is examples/getting-started).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and every docs/*.md, from the repository root, in a stable order.
fn documents() -> Vec<String> {
    let mut chapters: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("a docs/ entry").file_name())
        .filter_map(|name| name.into_string().ok())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    chapters.sort();
    let mut documents = vec!["README.md".to_owned()];
    documents.extend(chapters);
    documents
}

/// Every `(path, block)` quoted in `doc`.
fn quotes(doc: &str) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(root().join(doc)).unwrap();
    let mut found = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let Some(path) = line
            .trim()
            .strip_prefix("<!-- quote: ")
            .and_then(|rest| rest.strip_suffix(" -->"))
        else {
            continue;
        };
        let fence = lines.next().unwrap_or_default();
        assert!(
            fence.starts_with("```"),
            "{doc}: the line after the marker for {path} must open a code block"
        );
        let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
        found.push((path.to_owned(), body.join("\n") + "\n"));
    }
    found
}

/// Checks every quote of `doc` against its file, and that `required` are all quoted.
fn check(doc: &str, required: &[&str]) {
    let quotes = quotes(doc);
    for (path, block) in &quotes {
        let file = std::fs::read_to_string(root().join(path))
            .unwrap_or_else(|e| panic!("{doc} quotes {path}: {e}"));
        assert!(
            *block == file,
            "{doc}: the block quoting {path} differs from the file; run python3 scripts/sync_quotes.py"
        );
    }
    for path in required {
        assert!(
            quotes.iter().any(|(quoted, _)| quoted == path),
            "{doc} must quote {path}"
        );
    }
}

#[test]
fn every_quote_of_the_readme_and_the_book_equals_its_file() {
    let documents = documents();
    assert!(documents.len() > 1, "docs/ holds no chapter: {documents:?}");
    for doc in &documents {
        check(doc, &[]);
    }
}

#[test]
fn the_readme_quotes_the_getting_started_provider_and_its_configuration() {
    check(
        "README.md",
        &[
            "examples/getting-started/src/bin/hello-provider.rs",
            "examples/getting-started/config/provider.yaml",
        ],
    );
}

#[test]
fn the_using_chapter_quotes_the_getting_started_project() {
    check(
        "docs/using.md",
        &[
            "examples/getting-started/src/bin/hello-provider.rs",
            "examples/getting-started/src/bin/hello-consumer.rs",
            "examples/getting-started/config/provider.yaml",
        ],
    );
}

#[test]
fn the_configuration_chapter_quotes_the_reference_configuration() {
    check("docs/configuration.md", &["examples/config/reference.yaml"]);
}

#[test]
fn the_guide_quotes_every_file_of_the_project() {
    check(
        "docs/getting-started.md",
        &[
            "examples/getting-started/build.rs",
            "examples/getting-started/proto/hello.proto",
            "examples/getting-started/src/lib.rs",
            "examples/getting-started/src/bin/hello-provider.rs",
            "examples/getting-started/src/bin/hello-consumer.rs",
            "examples/getting-started/config/provider.yaml",
            "examples/getting-started/config/consumer.yaml",
        ],
    );
}
