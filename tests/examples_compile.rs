//! Every Python file of examples/, benches/ and scripts/ compiles (to
//! bytecode, in memory), and every name it takes from a sibling module (one
//! of those folders: benches put examples/ on their path) exists there,
//! checked on the syntax tree; every shell script there parses (`bash -n`).
//! They need torch, Triton and GPUs to run, which this machine may lack; the
//! GPU scripts (scripts/gpu-layouts.sh, scripts/gpu-footprint-zoo.sh) run
//! them, so a slip there would otherwise first show on the GPU.

use std::path::Path;
use std::process::Command;

const CHECK: &str = r#"
import ast, os, sys
mods = {}
for root in sys.argv[1:]:
    for f in sorted(os.listdir(root)):
        if f.endswith(".py"):
            if f[:-3] in mods:
                sys.exit(f"two modules named {f[:-3]}: {mods[f[:-3]]} and {os.path.join(root, f)}")
            mods[f[:-3]] = os.path.join(root, f)
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

fn python() -> &'static str {
    ["python3", "python"]
        .into_iter()
        .find(|p| {
            Command::new(p)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("python3 is needed for the example checks")
}

/// The check's verdict on these folders: (passed, what it printed).
fn check_python(dirs: &[&Path]) -> (bool, String) {
    let out = Command::new(python())
        .arg("-c")
        .arg(CHECK)
        .args(dirs)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

fn repo_dir(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

#[test]
fn every_example_compiles_and_its_local_imports_exist() {
    let dirs = ["examples", "benches", "scripts"].map(repo_dir);
    let (passed, text) = check_python(&dirs.each_ref().map(|d| d.as_path()));
    assert!(passed, "{text}");
    for f in ["moe_dp_ep", "pipeline_pp", "context_parallel"] {
        assert!(dirs[0].join(format!("{f}.py")).exists(), "{f}");
    }
    assert!(text.starts_with("ok "), "{text}");
    let count: usize = text.trim()[3..].parse().unwrap();
    let on_disk = dirs
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .filter(|e| e.as_ref().unwrap().path().extension() == Some("py".as_ref()))
        .count();
    assert_eq!(count, on_disk);
}

/// The check is not blind: a bench taking a name its sibling lacks, and a
/// file that does not parse, each fail it, named.
#[test]
fn the_python_check_names_a_missing_import_and_a_syntax_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rows.py"), "def read(): pass\n").unwrap();
    std::fs::write(dir.path().join("bench.py"), "from rows import reed\n").unwrap();
    let (passed, text) = check_python(&[dir.path()]);
    assert!(!passed);
    assert!(text.contains("bench: rows.reed"), "{text}");
    std::fs::write(dir.path().join("bench.py"), "def f(:\n").unwrap();
    let (passed, text) = check_python(&[dir.path()]);
    assert!(!passed);
    assert!(text.contains("bench.py"), "{text}");
}

/// Every shell script of scripts/ and benches/ parses: most run only on the
/// GPU machine.
#[test]
fn every_shell_script_parses() {
    let mut checked = 0;
    for dir in ["scripts", "benches", ".ci"].map(repo_dir) {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let is_shell = path.extension() == Some("sh".as_ref())
                || std::fs::read_to_string(&path)
                    .is_ok_and(|t| t.starts_with("#!/usr/bin/env bash"));
            if !path.is_file() || !is_shell {
                continue;
            }
            let out = Command::new("bash").arg("-n").arg(&path).output().unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked}");
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
