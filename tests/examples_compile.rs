//! Every example script is valid Python: they only run on a GPU machine, so a
//! syntax error would otherwise first show there.

use std::path::Path;
use std::process::Command;

#[test]
fn every_example_compiles() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut scripts: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "py"))
        .collect();
    scripts.sort();
    assert!(
        scripts.len() >= 6,
        "examples/ lost its scripts: {scripts:?}"
    );
    let out_dir = tempfile::tempdir().unwrap();
    for script in &scripts {
        // Compile into a temporary folder: no __pycache__ left in the tree.
        let target = out_dir
            .path()
            .join(script.file_name().unwrap())
            .with_extension("pyc");
        let code = "import py_compile, sys; py_compile.compile(sys.argv[1], cfile=sys.argv[2], doraise=True)";
        let out = Command::new("python3")
            .args(["-c", code])
            .arg(script)
            .arg(&target)
            .output()
            .expect("python3 runs");
        assert!(
            out.status.success(),
            "{} does not compile:\n{}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
