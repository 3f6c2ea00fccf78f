//! The in-pod binaries are static: no ELF interpreter, and they run (and
//! serve a real call) inside an empty chroot with no libc at all.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use e2e_tests::{bin, output_within, prerequisite, require_command, require_root, Wrapper};

/// The ELF program header types of `path` (x86-64, little endian).
fn program_header_types(path: &Path) -> Vec<u32> {
    let elf = std::fs::read(path).unwrap();
    assert_eq!(&elf[..4], b"\x7fELF", "{} is not ELF", path.display());
    assert_eq!(elf[4], 2, "64-bit");
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    (0..phnum)
        .map(|i| {
            let o = phoff + i * phentsize;
            u32::from_le_bytes(elf[o..o + 4].try_into().unwrap())
        })
        .collect()
}

const PT_INTERP: u32 = 3;
const PT_DYNAMIC: u32 = 2;

#[test]
fn binaries_have_no_interpreter() {
    for name in ["wrapper-server", "health-probe", "example-fn"] {
        let types = program_header_types(&bin(name));
        assert!(
            !types.contains(&PT_INTERP),
            "{name} needs a dynamic loader: {types:?}"
        );
        // static-pie keeps a DYNAMIC segment for self-relocation; what
        // matters is that nothing is loaded from outside (checked below by
        // running in an empty root).
        let _ = PT_DYNAMIC;
    }
}

#[tokio::test]
async fn wrapper_and_probe_serve_in_an_empty_root() {
    let Some(()) =
        prerequisite(require_root().and_then(|()| require_command("chroot", &["--version"])))
    else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    for name in ["wrapper-server", "health-probe", "example-fn"] {
        std::fs::copy(bin(name), root.path().join(name)).unwrap();
    }
    // Nothing else in the root: no /lib, no /etc, no /proc, no shell.
    let out = output_within(
        Command::new("chroot")
            .arg(root.path())
            .args(["/wrapper-server", "--version"]),
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut cmd = Command::new("chroot");
    cmd.arg(root.path())
        .arg("/wrapper-server")
        .args(["--host", "127.0.0.1", "--port", "0"]);
    let w = Wrapper::start_command(cmd, &[], &["/example-fn"]).unwrap();
    let rl = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../examples/resourcelist.yaml"
    ))
    .unwrap();
    let resp = w
        .client()
        .await
        .unwrap()
        .evaluate_function(proto::pb::EvaluateFunctionRequest {
            resource_list: rl.into(),
            image: "example-fn".into(),
            tag: String::new(),
        })
        .await
        .unwrap();
    assert!(String::from_utf8_lossy(&resp.into_inner().resource_list).contains("owner: team-shop"));

    // The probe, also inside the empty root, against `localhost` (no
    // /etc/hosts there: it must not need NSS to resolve it).
    let port = w.addr.port().to_string();
    let probe = output_within(
        Command::new("chroot").arg(root.path()).args([
            "/health-probe",
            "-addr",
            &format!("localhost:{port}"),
        ]),
        None,
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(
        probe.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&probe.stderr)
    );
    assert!(String::from_utf8_lossy(&probe.stderr).contains("status: SERVING"));
}
