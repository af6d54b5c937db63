//! Locates stateright's own two-phase-commit example (`examples/2pc.rs`,
//! Gray & Lamport's "Consensus on Transaction Commit") in the source of the
//! stateright version Cargo resolved, so that `examples/figures.rs` can
//! measure it next to lockcheck's models in the same run without a copy of
//! it in this repository. The file is read from the cargo registry (or a
//! vendored directory) at build time; everything from its `fn main` on is
//! dropped because `main` needs crates this one does not depend on.
//!
//! If the file cannot be found, `OUT_DIR/stateright_2pc.rs` is empty and the
//! `stateright_2pc_missing` cfg is set; the figures then say why the
//! baseline is absent instead of failing the build.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(stateright_2pc_missing)");
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let (text, note) = match locate() {
        Ok(path) => {
            println!("cargo:rerun-if-changed={}", path.display());
            match std::fs::read_to_string(&path) {
                Ok(src) => (without_main(&src), path.display().to_string()),
                Err(e) => (
                    String::new(),
                    format!("cannot read {}: {e}", path.display()),
                ),
            }
        }
        Err(why) => (String::new(), why),
    };
    if text.is_empty() {
        println!("cargo:rustc-cfg=stateright_2pc_missing");
    }
    std::fs::write(out.join("stateright_2pc.rs"), text).expect("write OUT_DIR");
    std::fs::write(out.join("stateright_2pc.source"), note).expect("write OUT_DIR");
}

/// The resolved stateright version from the workspace's `Cargo.lock`.
fn stateright_version() -> Result<String, String> {
    let mut dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").map_err(|e| e.to_string())?);
    loop {
        let lock = dir.join("Cargo.lock");
        if let Ok(text) = std::fs::read_to_string(&lock) {
            println!("cargo:rerun-if-changed={}", lock.display());
            let mut lines = text.lines();
            while let Some(line) = lines.next() {
                if line.trim() == "name = \"stateright\"" {
                    let v = lines.next().unwrap_or_default();
                    if let Some(v) = v.trim().strip_prefix("version = ") {
                        return Ok(v.trim_matches('"').to_string());
                    }
                }
            }
            return Err(format!("no stateright package in {}", lock.display()));
        }
        if !dir.pop() {
            return Err("no Cargo.lock above the models crate".to_string());
        }
    }
}

fn locate() -> Result<PathBuf, String> {
    let version = stateright_version()?;
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let wanted = format!("stateright-{version}");
    let mut roots: Vec<PathBuf> = std::fs::read_dir(home.join("registry").join("src"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    roots.sort();
    if let Ok(manifest) = std::env::var("CARGO_MANIFEST_DIR") {
        for up in Path::new(&manifest).ancestors() {
            roots.push(up.join("vendor"));
        }
    }
    for root in roots {
        let file = root.join(&wanted).join("examples").join("2pc.rs");
        if file.is_file() {
            return Ok(file);
        }
    }
    Err(format!(
        "{wanted}/examples/2pc.rs is in neither {}/registry/src nor a vendor directory",
        home.display()
    ))
}

/// The example without its `main` (and the reporter import only `main`
/// uses); its imports may go unused without `main`.
fn without_main(src: &str) -> String {
    let body = match src.find("\nfn main(") {
        Some(i) => &src[..i],
        None => return String::new(),
    };
    body.lines()
        .filter(|l| !l.starts_with("//!"))
        .filter(|l| l.trim() != "use stateright::report::WriteReporter;")
        .map(|l| {
            if l.starts_with("use ") {
                format!("#[allow(unused_imports)]\n{l}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
