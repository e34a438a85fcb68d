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
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    for f in ["moe_dp_ep", "pipeline_pp", "context_parallel"] {
        assert!(dir.join(format!("{f}.py")).exists(), "{f}");
    }
    assert!(text.starts_with("ok "), "{text}");
}
