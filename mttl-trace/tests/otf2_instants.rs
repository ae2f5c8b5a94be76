//! OTF2 keeps the instants: a real trace with thread records and remote
//! calls (the fuzz fixture) exported, read back with `otf2-print`: one
//! `PARAMETER_STRING` per instant the export counted, each naming its
//! category's parameter. Skipped (passing) in a build without the `otf2`
//! feature, where the export must say how to get it.

use std::path::Path;
use std::process::Command;

use mttl_trace::ExportOptions;

#[test]
fn instants_are_parameter_string_events() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/heavy-threads");
    let trace = mttl_trace::read_dir(&fixture).unwrap();
    let dir = std::env::temp_dir().join(format!("mttl-trace-otf2-instants-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let result = mttl_trace::export_otf2(&trace, &dir, ExportOptions::default());
    if !mttl_trace::OTF2_BUILT {
        let e = result.unwrap_err().to_string();
        assert!(e.contains("--features otf2"), "{e}");
        return;
    }
    let summary = result.unwrap_or_else(|e| panic!("{e}"));
    assert!(summary.instants > 100, "{summary:?}");
    let out = Command::new("otf2-print")
        .arg(dir.join("traces.otf2"))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run otf2-print ({e}): install otf2-tools (scripts/lib/install-deps.sh does)")
        });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let params: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("PARAMETER_STRING"))
        .collect();
    assert_eq!(
        params.len(),
        summary.instants,
        "{}",
        &text[..text.len().min(4000)]
    );
    for category in ["mttl invoke", "mttl thread"] {
        assert!(
            params
                .iter()
                .any(|l| l.contains(&format!("\"{category}\""))),
            "no {category} instant: {:?}",
            &params[..params.len().min(10)]
        );
    }
    // Named as the export names them: spawns with the thread's function.
    assert!(
        params
            .iter()
            .any(|l| l.contains("\"mttl thread\"") && l.contains("Value: \"spawn ")),
        "{:?}",
        &params[..params.len().min(10)]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
