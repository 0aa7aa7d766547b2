//! The images `hack/images/build.sh` wrote (`$ICHOR_BUILD_DIR/images/*.tar`) against the
//! repository's `Dockerfile`: each archive is the final stage of its name (binaries, user,
//! entrypoint, exposed ports), on distroless cc-debian12:nonroot's files, with every shared
//! library its binaries load; each one starts its entrypoint from its own root file system as
//! 65532; and two builds of the same binaries are byte for byte the same.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr, missing_docs)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use ichor_testkit::consumers::repo_root;
use ichor_testkit::images::{self, Image, Kind, NAMES, Stage};

/// The distroless base the build script's root file system is modelled on.
const DISTROLESS: &str = "gcr.io/distroless/cc-debian12:nonroot";

/// The images, opened; `None` (an early return) only under `ICHOR_REQUIRE_CONSUMERS=0`.
fn open_all() -> Option<Vec<(&'static str, Image)>> {
    NAMES
        .iter()
        .map(|name| {
            let path = images::require_archive(name)?;
            Some((
                *name,
                Image::open(&path).unwrap_or_else(|e| panic!("{name}: {e:#}")),
            ))
        })
        .collect()
}

/// The Dockerfile's final stages (those built on distroless), by name.
fn final_stages() -> Vec<Stage> {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    let (stages, args) = images::dockerfile(&text).unwrap();
    assert_eq!(
        args.get("DISTROLESS").map(String::as_str),
        Some(DISTROLESS),
        "the Dockerfile's base changed: hack/images/oci_image.py builds the root file system of \
         {DISTROLESS}; make it the new base's"
    );
    stages.into_iter().filter(|s| s.base == DISTROLESS).collect()
}

/// `docker build --target NAME … -t REF` in the Dockerfile's header: the reference per target.
fn dockerfile_refs() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo_root().join("Dockerfile")).unwrap();
    text.lines()
        .filter(|line| line.trim_start().starts_with("#") && line.contains("docker build"))
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let after = |flag: &str| {
                let at = words.iter().position(|w| *w == flag)?;
                words.get(at + 1).map(|w| (*w).to_owned())
            };
            Some((after("--target")?, after("-t")?))
        })
        .collect()
}

/// The chart's `appVersion`, and the repository its values name for `component` (`controller`,
/// `issuer`; none for the CLI).
fn chart_image(component: &str) -> (Option<String>, String) {
    let read = |file: &str| -> serde_yaml::Value {
        serde_yaml::from_str(&std::fs::read_to_string(repo_root().join(file)).unwrap()).unwrap()
    };
    let values = read("helm/ichor/values.yaml");
    let chart = read("helm/ichor/Chart.yaml");
    (
        values[component]["image"]["repository"]
            .as_str()
            .map(str::to_owned),
        chart["appVersion"].as_str().unwrap().to_owned(),
    )
}

/// The paths `ldd` resolves for `binary` (the loader included); none for a static binary.
fn ldd(binary: &Path) -> Vec<String> {
    let output = Command::new("ldd").arg(binary).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if stdout.contains("statically linked") || stdout.contains("not a dynamic executable") {
        return Vec::new();
    }
    assert!(output.status.success(), "ldd {}: {stdout}", binary.display());
    assert!(
        !stdout.contains("not found"),
        "ldd {}: {stdout}",
        binary.display()
    );
    stdout
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let path = line.split(" => ").last()?.split(" (").next()?;
            path.starts_with('/').then(|| path.to_owned())
        })
        .collect()
}

#[test]
#[ignore = "needs the Ichor images: hack/images/build.sh"]
fn each_image_is_the_dockerfile_final_stage_of_its_name() {
    let Some(images) = open_all() else { return };
    let stages = final_stages();
    assert_eq!(
        stages.iter().map(|s| s.name.as_str()).collect::<BTreeSet<_>>(),
        NAMES.into_iter().collect::<BTreeSet<_>>(),
        "the Dockerfile's final stages and hack/images/build.sh's images differ"
    );
    let refs = dockerfile_refs();
    for (name, image) in &images {
        let stage = stages.iter().find(|s| s.name == *name).unwrap();
        let binaries: BTreeSet<String> = image
            .entries
            .iter()
            .filter(|e| e.path.starts_with("/usr/local/bin/"))
            .map(|e| {
                assert_eq!(e.kind, Kind::File, "{name}: {}", e.path);
                assert_eq!((e.mode, e.uid, e.gid), (0o755, 0, 0), "{name}: {}", e.path);
                e.path.clone()
            })
            .collect();
        assert_eq!(binaries, stage.files, "{name}: the binaries");
        assert_eq!(image.config_str("User"), stage.user.as_deref(), "{name}: USER");
        assert_eq!(
            image.config_list("Entrypoint"),
            stage.entrypoint,
            "{name}: ENTRYPOINT"
        );
        assert_eq!(image.exposed_ports(), stage.exposed, "{name}: EXPOSE");

        // The name containerd stores it under is the Dockerfile's `-t` repository with the
        // chart's appVersion, and the chart's values name the same repository.
        let (_, docker_ref) = refs
            .iter()
            .find(|(target, _)| target == name)
            .unwrap_or_else(|| panic!("no `docker build --target {name}` line in the Dockerfile"));
        let repository = docker_ref.rsplit_once(':').unwrap().0;
        let component = name.strip_prefix("ichor-").unwrap_or(name);
        let (chart_repository, app_version) = chart_image(component);
        if *name != "ichor" {
            assert_eq!(
                chart_repository.as_deref(),
                Some(repository),
                "{name}: helm/ichor/values.yaml's {component}.image.repository"
            );
        }
        assert_eq!(image.reference, format!("{repository}:{app_version}"), "{name}");
        assert_eq!(image.ref_name, app_version, "{name}");
        eprintln!("{name}: {} {}", image.reference, image.digest);
    }
}

#[test]
#[ignore = "needs the Ichor images: hack/images/build.sh"]
fn each_image_holds_the_files_distroless_nonroot_gives_a_program() {
    let Some(images) = open_all() else { return };
    for (name, image) in &images {
        let text = |path: &str| String::from_utf8(image.read(path).unwrap()).unwrap();
        assert_eq!(
            text("/etc/passwd"),
            "root:x:0:0:root:/root:/sbin/nologin\n\
             nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
             nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
            "{name}"
        );
        assert_eq!(
            text("/etc/group"),
            "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n",
            "{name}"
        );
        assert!(
            text("/etc/nsswitch.conf").contains("\nhosts:          files dns\n"),
            "{name}"
        );
        let release = text("/etc/os-release");
        assert!(
            release.starts_with("PRETTY_NAME=\"Distroless\"\n"),
            "{name}: {release}"
        );
        assert!(
            release.contains("VERSION_ID=\"12\"\n"),
            "{name}: Debian 12: {release}"
        );
        let certs = text("/etc/ssl/certs/ca-certificates.crt");
        assert!(
            certs.matches("-----BEGIN CERTIFICATE-----").count() > 100,
            "{name}: CA bundle"
        );

        let dir = |path: &str| {
            let e = image.entry(path).unwrap_or_else(|| panic!("{name}: no {path}"));
            assert_eq!(e.kind, Kind::Dir, "{name}: {path}");
            (e.mode, e.uid, e.gid)
        };
        assert_eq!(dir("/tmp"), (0o1777, 0, 0), "{name}: /tmp");
        assert_eq!(
            dir("/home/nonroot"),
            (0o700, 65532, 65532),
            "{name}: /home/nonroot"
        );
        assert_eq!(dir("/root"), (0o700, 0, 0), "{name}: /root");
        assert_eq!(image.config_str("WorkingDir"), Some("/home/nonroot"), "{name}");
        assert_eq!(
            image.config_list("Env"),
            [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"
            ],
            "{name}"
        );

        // Reproducible: parents before children in name order, one fixed time, root's files
        // but the nonroot home.
        let order: Vec<Vec<&str>> = image
            .entries
            .iter()
            .map(|e| e.path.split('/').collect())
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "{name}: entries not sorted"
        );
        for e in &image.entries {
            assert_eq!(e.mtime, "1970-01-01 00:00:00", "{name}: {}", e.path);
            if e.path != "/home/nonroot" {
                assert_eq!((e.uid, e.gid), (0, 0), "{name}: {}", e.path);
            }
        }
    }
}

#[test]
#[ignore = "needs the Ichor images: hack/images/build.sh"]
fn every_library_each_binary_loads_is_in_its_image() {
    let Some(images) = open_all() else { return };
    for (name, image) in &images {
        for binary in image
            .entries
            .iter()
            .filter(|e| e.path.starts_with("/usr/local/bin/"))
        {
            let libraries = ldd(&image.rootfs().join(binary.path.trim_start_matches('/')));
            if libraries.is_empty() {
                eprintln!("{name}: {} is static", binary.path);
                continue;
            }
            assert!(
                libraries.iter().any(|l| l.contains("ld-linux")),
                "{name}: {} names no loader: {libraries:?}",
                binary.path
            );
            for library in &libraries {
                let found = image.resolve(library);
                assert!(
                    found.is_some_and(|e| e.kind == Kind::File),
                    "{name}: {} loads {library}, which is not in the image",
                    binary.path
                );
            }
        }
    }
}

#[test]
#[ignore = "needs the Ichor images: hack/images/build.sh"]
fn each_image_starts_its_entrypoint_as_65532_from_its_own_root_file_system() {
    let Some(images) = open_all() else { return };
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0")),
        "starting an image's root file system as 65532 needs root (unshare --root --setuid)"
    );
    for (name, image) in &images {
        let rootfs = image.rootfs();
        // The runtime's mount point for /proc (the image has none, like any image).
        std::fs::create_dir(rootfs.join("proc")).unwrap();
        let (uid, gid) = image.config_str("User").unwrap().split_once(':').unwrap();
        let output = Command::new("unshare")
            .args(["--mount", "--pid", "--fork", "--mount-proc"])
            .arg(format!("--root={}", rootfs.display()))
            .arg(format!("--wd={}", image.config_str("WorkingDir").unwrap()))
            .args(["--setuid", uid, "--setgid", gid, "--"])
            .args(image.config_list("Entrypoint"))
            .arg("--version")
            .env_clear()
            .envs(
                image
                    .config_list("Env")
                    .iter()
                    .filter_map(|kv| kv.split_once('=')),
            )
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{name}: {} --version in its root file system: {}\n{stdout}{}",
            image.config_list("Entrypoint").join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        assert_eq!(
            stdout,
            format!("{name} {}\n", env!("CARGO_PKG_VERSION")),
            "{name}"
        );
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            !mounts.contains(&rootfs.display().to_string()),
            "{name}: a mount of the run is left on the machine"
        );
    }
}

#[test]
#[ignore = "needs the Ichor images: hack/images/build.sh"]
fn two_builds_of_the_same_binaries_are_byte_for_byte_equal() {
    // The script needs what hack/test.sh's build left (the binaries); the archives there say so.
    if open_all().is_none() {
        return;
    }
    let build = |out: &Path| {
        let started = std::time::Instant::now();
        let output = Command::new(repo_root().join(images::BUILD_SCRIPT))
            .arg("--out")
            .arg(out)
            .env_remove("SOURCE_DATE_EPOCH")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}: {}",
            images::BUILD_SCRIPT,
            String::from_utf8_lossy(&output.stderr)
        );
        eprintln!(
            "{} in {:?}:\n{}",
            images::BUILD_SCRIPT,
            started.elapsed(),
            String::from_utf8_lossy(&output.stdout)
        );
    };
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    build(a.path());
    build(b.path());
    for name in NAMES {
        let read = |dir: &Path| std::fs::read(dir.join(format!("{name}.tar"))).unwrap();
        assert!(read(a.path()) == read(b.path()), "{name}: two builds differ");
    }
}
