//! The README is the front door and `docs/` is the book (mdBook, `book.toml` at the root): this
//! test keeps the two navigable without mdbook installed. Every page of `docs/` is in the table of
//! contents (`docs/SUMMARY.md`), or `mdbook build` leaves it out of the book; every relative link
//! in the README and the book reaches a file, and its `#anchor` a heading of that file, as GitHub
//! and mdBook both name headings; and the README stays short enough to read (at most
//! [`README_MAX_LINES`] lines). Links into the web (`https://…`) are not followed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The README's budget: what lockcheck does, one run, install, the two commands, the concepts and
/// the ways on; everything longer belongs in a page of the book.
const README_MAX_LINES: usize = 400;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The pages of the book: every `*.md` directly in `docs/`, sorted.
fn book_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    pages
}

/// The lines of a markdown text outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let marker = if t.starts_with("```") {
            Some("```")
        } else if t.starts_with("~~~") {
            Some("~~~")
        } else {
            None
        };
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(f), Some(m)) if f == m => fence = None,
            (None, None) => out.push((i + 1, line)),
            _ => {}
        }
    }
    out
}

/// A line with its inline code spans (`` `…` ``, ``` ``…`` ```) removed: a `](` inside code is
/// text, not a link.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + ticks..];
        match after.find(&"`".repeat(ticks)) {
            Some(end) => rest = &after[end + ticks..],
            // An unmatched backtick is literal text.
            None => {
                out.push_str(&rest[start..start + ticks]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of the inline links and images of a line (`[text](target)`, `![alt](target)`),
/// a title (`"…"`) dropped.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = line.as_str();
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let Some(end) = after.find(')') else { break };
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.to_string());
        rest = &after[end..];
    }
    targets
}

/// The anchor GitHub and mdBook give a heading: lowercased, letters, digits, `-` and `_` kept,
/// spaces turned into `-`, everything else dropped (backticks, commas, parentheses, quotes).
fn slug(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c.to_lowercase().next().unwrap())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a markdown file's headings; a repeated heading gets `-1`, `-2`, … as both
/// renderers number them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let s = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let n = seen.entry(s.clone()).or_insert(0);
        out.insert(if *n == 0 {
            s.clone()
        } else {
            format!("{s}-{n}")
        });
        *n += 1;
    }
    out
}

/// Every broken relative link of one markdown file, as `file:line: target: why`.
fn broken_links(file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let name = file
        .strip_prefix(repo())
        .unwrap_or(file)
        .display()
        .to_string();
    let dir = file.parent().unwrap();
    let mut broken = Vec::new();
    for (n, line) in prose_lines(&text) {
        for target in link_targets(line) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let to = if path.is_empty() {
                file.to_path_buf()
            } else {
                dir.join(path)
            };
            if !to.exists() {
                broken.push(format!("{name}:{n}: {target}: no such file"));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if to.extension().is_some_and(|x| x == "md") {
                let headings = anchors(&std::fs::read_to_string(&to).unwrap());
                if !headings.contains(anchor) {
                    broken.push(format!(
                        "{name}:{n}: {target}: no heading with anchor `{anchor}`"
                    ));
                }
            }
        }
    }
    broken
}

#[test]
fn every_page_of_the_book_is_in_its_table_of_contents() {
    let summary = std::fs::read_to_string(repo().join("docs/SUMMARY.md")).unwrap();
    let listed: BTreeSet<String> = prose_lines(&summary)
        .into_iter()
        .flat_map(|(_, l)| link_targets(l))
        .collect();
    let missing: Vec<String> = book_pages()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "SUMMARY.md" && !listed.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "pages of docs/ not in docs/SUMMARY.md (mdbook would leave them out): {missing:?}"
    );
    // Every entry of the table of contents is a page: checked with the other links below.
    assert!(listed.len() > 10, "docs/SUMMARY.md lists {listed:?}");
}

#[test]
fn every_relative_link_of_the_readme_and_the_book_reaches_its_file_and_heading() {
    let mut files = vec![repo().join("README.md")];
    files.extend(book_pages());
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f)).collect();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines <= README_MAX_LINES,
        "README.md has {lines} lines, more than {README_MAX_LINES}: move the detail into a page of docs/"
    );
}

/// The visible lines of each ```` ```rust ```` block of `text` (mdBook's hidden `# ` lines left
/// out), in order.
fn rust_blocks(text: &str) -> Vec<Vec<String>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<String>> = None;
    for line in text.lines() {
        match current.as_mut() {
            None if line.starts_with("```rust") => current = Some(Vec::new()),
            None => {}
            Some(_) if line.starts_with("```") => blocks.extend(current.take()),
            Some(_) if line.starts_with("# ") || line == "#" => {}
            Some(block) => block.push(line.to_string()),
        }
    }
    blocks
}

/// The README's Rust code is not compiled where it stands (it shows no context, being the front
/// door), so it must be the book's first block of `docs/own-lock.md`, which is compiled as a doc
/// test (`OwnLockBlocks` in `src/lib.rs`): a user who copies it gets code that builds.
#[test]
fn the_readmes_rust_is_the_compiled_book_block() {
    let readme = rust_blocks(&std::fs::read_to_string(repo().join("README.md")).unwrap());
    let book = rust_blocks(&std::fs::read_to_string(repo().join("docs/own-lock.md")).unwrap());
    assert!(!readme.is_empty(), "the README shows a Rust block");
    for block in &readme {
        assert!(
            book.contains(block),
            "README block not in docs/own-lock.md, where it would be compiled:\n{}",
            block.join("\n")
        );
    }
    assert!(book.len() >= 4, "docs/own-lock.md has its Rust blocks");
}

/// The link checker itself: what it must catch, and what it must let through.
#[test]
fn the_link_checker_sees_links_headings_and_code() {
    assert_eq!(
        link_targets("see [a](x.md#y), ![img](p.png \"t\") and `[no](z.md)`"),
        ["x.md#y", "p.png"]
    );
    assert_eq!(
        slug("From a `#[test]`: the finding, kept"),
        "from-a-test-the-finding-kept"
    );
    assert_eq!(slug("The MySQL locks' latency"), "the-mysql-locks-latency");
    let a = anchors("# T\n```\n# not a heading\n```\n## Figures\n### Figures\n");
    assert_eq!(a, ["figures", "figures-1", "t"].map(String::from).into());
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("docs-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("page.md");
    std::fs::write(
        &page,
        "# Page\n\n[ok](page.md#page) [gone](missing.md) [bad](page.md#nowhere) [web](https://x.y/#z)\n",
    )
    .unwrap();
    let broken = broken_links(&page);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(broken.len(), 2, "{broken:?}");
    assert!(
        broken[0].ends_with(":3: missing.md: no such file"),
        "{broken:?}"
    );
    assert!(
        broken[1].ends_with(":3: page.md#nowhere: no heading with anchor `nowhere`"),
        "{broken:?}"
    );
}

/// The scenario files the README and "Writing a scenario" show are whole files that run and
/// reach what they expect (exit 0), so that a reader can copy one and start from it.
#[test]
fn the_scenarios_the_docs_show_run_as_they_expect() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("docs-scenarios-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut ran = Vec::new();
    for page in ["README.md", "docs/scenarios.md"] {
        let text = std::fs::read_to_string(repo().join(page)).unwrap();
        let Some(start) = text.find("```toml\nname = ") else {
            panic!("{page} shows no scenario file (a ```toml block starting with `name =`)")
        };
        let body = &text[start + "```toml\n".len()..];
        let body = &body[..body.find("```").unwrap()];
        let file = dir.join(format!("{}.toml", page.replace('/', "-")));
        std::fs::write(&file, body).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_lockcheck"))
            .arg("run")
            .arg(&file)
            .output()
            .unwrap();
        ran.push((page, out));
    }
    let _ = std::fs::remove_dir_all(&dir);
    for (page, out) in ran {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{page}'s scenario did not reach what it expects:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
