//! Every example compiles (to bytecode, in memory), and every name it takes from a
//! sibling example module exists there, checked on the syntax tree: the
//! examples need torch, Triton and GPUs to run, which this machine may lack;
//! the GPU script (scripts/gpu-layouts.sh) runs them.

use std::path::Path;
use std::process::Command;

const CHECK: &str = r#"
import ast, os, sys
root = sys.argv[1]
mods = {f[:-3]: os.path.join(root, f) for f in os.listdir(root) if f.endswith(".py")}
defs = {}
for name, path in mods.items():
    tree = ast.parse(open(path).read(), path)
    compile(tree, path, "exec")
    defs[name] = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))} | {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defs[name] |= {a.asname or a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
bad = []
for name, path in mods.items():
    tree = ast.parse(open(path).read(), path)
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module in mods:
            bad += [f"{name}: {n.module}.{a.name}" for a in n.names if a.name not in defs[n.module]]
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in mods and n.value.id != name:
            if n.attr not in defs[n.value.id]:
                bad.append(f"{name}: {n.value.id}.{n.attr}")
print("\n".join(bad) if bad else f"ok {len(mods)}")
sys.exit(1 if bad else 0)
"#;

#[test]
fn every_example_compiles_and_its_local_imports_exist() {
    let Some(py) = ["python3", "python"].into_iter().find(|p| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        panic!("python3 is needed for the example checks");
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let out = Command::new(py)
        .arg("-c")
        .arg(CHECK)
        .arg(&dir)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    for f in ["moe_dp_ep", "pipeline_pp", "context_parallel"] {
        assert!(dir.join(format!("{f}.py")).exists(), "{f}");
    }
    assert!(text.starts_with("ok "), "{text}");
}

fn layouts_script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-layouts.sh")
}

#[test]
fn the_layouts_script_refuses_bad_arguments_naming_them() {
    let out = Command::new("bash")
        .arg(layouts_script())
        .args(["/nonexistent/prewarm-doctor", "/tmp/x", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("BIN '/nonexistent/prewarm-doctor'"));
    let out = Command::new("bash")
        .arg(layouts_script())
        .args([env!("CARGO_BIN_EXE_prewarm-doctor"), "/tmp/x", "two"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NGPU must be a positive integer, got 'two'")
    );
}

/// The remainder check the GPU script prints after every run, on the real
/// two-node recording's JSON report (within bounds), and on a copy of that
/// report whose one remainder is pushed over the bound (named, exit 1).
#[test]
fn the_remainder_check_passes_the_real_recording_and_names_a_phase_over_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/h200/multinode-fsdp2");
    let st = Command::new(env!("CARGO_BIN_EXE_prewarm-doctor"))
        .arg("report")
        .arg(&fixture)
        .args(["--format", "json", "-o"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let check = |file: &Path| {
        Command::new("bash")
            .arg(layouts_script())
            .arg("--check-remainders")
            .arg(file)
            .output()
            .unwrap()
    };
    let out = check(&json);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("REMAINDER ok: 16 phase ends, 0 over the bound"),
        "{text}"
    );
    // Test input only: the real report with one remainder made 1 GiB.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    v["attempts"][0]["processes"][0]["phases"][1]["gap_end"]["unexplained"] = (1u64 << 30).into();
    let bad = dir.path().join("over.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    let out = check(&bad);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("REMAINDER OVER: 16 phase ends, 1 over the bound"),
        "{text}"
    );
    assert!(text.contains("+1024.0 MiB"), "{text}");
}
