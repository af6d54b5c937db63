//! Where `lockcheck explore` writes its finding (`--out`), checked before any case runs: a search
//! and its shrink can take minutes, and a path found unusable only at the end would throw the
//! finding away. The finding never replaces the scenario it came from, whatever path names it.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

/// Why `out` cannot take the finding of a search over `input`, or `Ok` when it can. The input is
/// recognised by identity (device and inode), so `..`, a symbolic link or a hard link to it are
/// refused too. A file that does not exist yet is created and removed again, which is the only
/// test of writability that also holds for root, read-only file systems and ACLs.
pub fn check(input: &Path, out: &Path) -> Result<(), String> {
    let shown = out.display();
    if let (Ok(i), Ok(o)) = (std::fs::metadata(input), std::fs::metadata(out)) {
        if i.dev() == o.dev() && i.ino() == o.ino() {
            return Err(format!(
                "--out {shown}: that is the input scenario {} itself; the finding would replace \
                 it: give another file (the default is {})",
                input.display(),
                crate::explore::default_out(input).display()
            ));
        }
    }
    match std::fs::metadata(out) {
        Ok(m) if m.is_dir() => Err(format!(
            "--out {shown}: is a directory; give a file name, such as {}",
            out.join(
                crate::explore::default_out(input)
                    .file_name()
                    .unwrap_or_default()
            )
            .display()
        )),
        Ok(_) => std::fs::OpenOptions::new()
            .append(true)
            .open(out)
            .map(drop)
            .map_err(|e| format!("--out {shown}: cannot be written: {e}")),
        Err(_) => {
            let parent = out.parent().filter(|p| !p.as_os_str().is_empty());
            let dir = parent.unwrap_or(Path::new("."));
            if !dir.is_dir() {
                return Err(format!(
                    "--out {shown}: the directory {} does not exist",
                    dir.display()
                ));
            }
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(out)
                .map_err(|e| format!("--out {shown}: cannot be created: {e}"))?;
            std::fs::remove_file(out)
                .map_err(|e| format!("--out {shown}: cannot be replaced once created: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::check;
    use std::path::Path;

    #[test]
    fn the_input_itself_is_refused_through_any_path_to_it() {
        let dir = std::env::temp_dir().join(format!("lockcheck-out-{}", std::process::id()));
        let sub = dir.join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        let input = dir.join("s.toml");
        std::fs::write(&input, "x").unwrap();
        std::os::unix::fs::symlink(&input, dir.join("link.toml")).unwrap();
        std::fs::hard_link(&input, dir.join("hard.toml")).unwrap();
        for same in [
            input.clone(),
            sub.join("../s.toml"),
            dir.join("link.toml"),
            dir.join("hard.toml"),
        ] {
            let e = check(&input, &same).unwrap_err();
            assert!(e.contains("input scenario"), "{}: {e}", same.display());
        }
        let e = check(&input, &dir).unwrap_err();
        assert!(e.contains("is a directory"), "{e}");
        let e = check(&input, &dir.join("missing/f.toml")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        // A file as the directory: not a directory, so nothing can be created under it.
        let e = check(&input, &dir.join("s.toml/f.toml")).unwrap_err();
        assert!(e.contains("does not exist"), "{e}");
        // A path that can be written is left as it was: a new file is not left behind.
        let fresh = dir.join("fresh.toml");
        check(&input, &fresh).unwrap();
        assert!(!fresh.exists());
        check(&input, Path::new(&dir.join("other.toml"))).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
