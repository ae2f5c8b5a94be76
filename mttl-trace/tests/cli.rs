//! `mttl-trace export` as a user runs it, on trace files built with the
//! format's encoders: a Perfetto file is written and said so; no format
//! asked, an unwritable FILE, a non-empty OTF2 DIR are refused with what
//! to do; a rank whose file is torn is exported up to its last complete
//! block, and the tool says where it ends.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mttl_core::trace::format::VERSION;
use support::build_for;

fn scratch(what: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("mttl-trace-cli-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    let _ = std::fs::remove_file(&p);
    p
}

/// A trace of two ranks in a new directory; rank 1's file cut to `cut`
/// bytes if given.
fn trace_dir(what: &str, cut: Option<usize>) -> (PathBuf, usize) {
    let dir = scratch(what);
    std::fs::create_dir_all(&dir).unwrap();
    let mut whole_blocks_end = 0;
    for rank in 0..2 {
        let (mut bytes, ends) = build_for(99, rank, 2, VERSION, 3, 20);
        if rank == 1 {
            if let Some(cut) = cut {
                whole_blocks_end = ends.iter().copied().filter(|&e| e <= cut).max().unwrap();
                bytes.truncate(cut);
            }
        }
        std::fs::write(dir.join(format!("rank-{rank:05}.mttltrace")), bytes).unwrap();
    }
    (dir, whole_blocks_end)
}

fn run(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mttl-trace"))
        .arg("export")
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

#[test]
fn a_perfetto_export_is_written_and_said() {
    let (dir, _) = trace_dir("ok", None);
    let file = scratch("ok.pftrace");
    let out = run(&[&dir, "--perfetto".as_ref(), &file]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("wrote Perfetto trace") && said.contains("2 ranks"),
        "{said}"
    );
    assert!(std::fs::metadata(&file).unwrap().len() > 0);
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_outputs_are_refused_saying_what_to_do() {
    let (dir, _) = trace_dir("bad", None);
    let none = run(&[&dir]);
    assert!(!none.status.success());
    assert!(
        text(&none.stderr).contains("--perfetto"),
        "{}",
        text(&none.stderr)
    );

    let unwritable = dir.join("missing").join("x.pftrace");
    let out = run(&[&dir, "--perfetto".as_ref(), &unwritable]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot write") && err.contains("missing"),
        "{err}"
    );

    // The trace's own directory is not empty; the Perfetto file asked
    // for with it is not written either.
    let file = scratch("bad.pftrace");
    let out = run(&[&dir, "--perfetto".as_ref(), &file, "--otf2".as_ref(), &dir]);
    assert!(!out.status.success());
    assert!(!file.exists());
    let err = text(&out.stderr);
    if mttl_trace::OTF2_BUILT {
        assert!(err.contains("not empty"), "{err}");
    } else {
        assert!(err.contains("--features otf2"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_torn_file_is_exported_up_to_where_it_ends() {
    // Cut inside rank 1's third block.
    let (_, ends) = build_for(99, 1, 2, VERSION, 3, 20);
    let (dir, whole) = trace_dir("torn", Some(ends[2] - 7));
    assert_eq!(whole, ends[1]);
    let file = scratch("torn.pftrace");
    let out = run(&[&dir, "--perfetto".as_ref(), &file]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("rank 1") && err.contains(&format!("ends at byte {whole}")),
        "{err}"
    );
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_dir_all(&dir);
}
