//! With the cargo feature `otf2`, links the OTF2 library (`export --otf2`),
//! found with the `otf2-config` tool it ships (Debian: libotf2-trace-dev);
//! without the feature, does nothing. A missing library stops the build
//! with what to install.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=OTF2_CONFIG");
    if std::env::var_os("CARGO_FEATURE_OTF2").is_none() {
        return;
    }
    let tool = std::env::var("OTF2_CONFIG").unwrap_or_else(|_| "otf2-config".to_owned());
    let flags = |arg: &str| -> String {
        let out = Command::new(&tool).arg(arg).output();
        match out {
            Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
            Ok(o) => panic!(
                "the `otf2` feature of mttl-trace needs the OTF2 library, but `{tool} {arg}` failed \
                 ({}): {}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!(
                "the `otf2` feature of mttl-trace needs the OTF2 library and its `{tool}` tool, \
                 which cannot be run ({e}): install it (Debian: `apt-get install \
                 libotf2-trace-dev otf2-tools`; scripts/lib/install-deps.sh does), set OTF2_CONFIG \
                 to the path of otf2-config, or build without the feature"
            ),
        }
    };
    for word in flags("--ldflags").split_whitespace() {
        if let Some(dir) = word.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        }
    }
    let libs = flags("--libs");
    let mut linked = false;
    for word in libs.split_whitespace() {
        if let Some(lib) = word.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={lib}");
            linked |= lib == "otf2";
        }
    }
    if !linked {
        panic!("`{tool} --libs` printed no -lotf2 ({libs:?}): is the OTF2 library installed?");
    }
}
