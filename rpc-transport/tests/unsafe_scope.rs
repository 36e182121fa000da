//! `unsafe` stays in the one module that adopts inherited file descriptors.

use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_src_fd_rs_allows_unsafe_code() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let allowing: Vec<_> = files
        .iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap();
            text.contains("allow(unsafe_code)")
                || text.contains("unsafe {")
                || text.contains("unsafe fn")
        })
        .map(|path| path.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    assert_eq!(allowing, ["fd.rs"]);
}
