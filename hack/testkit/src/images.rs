//! The Ichor images as `hack/images/build.sh` writes them (`$ICHOR_BUILD_DIR/images/<name>.tar`,
//! OCI image archives), opened for assertions, and the repository's `Dockerfile` read for its
//! final stages, so a test can hold one against the other. The archives are read with the
//! machine's `tar`, `gzip` and `sha256sum`: every blob's digest and the layer's `diff_id` are
//! checked on open, as containerd checks them on import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context as _, Result, bail, ensure};
use serde_json::Value;

use crate::consumers;

/// The images, named as the Dockerfile's final stages.
pub const NAMES: [&str; 3] = ["ichor-controller", "ichor-issuer", "ichor"];

/// The script that builds them (what a missing archive names).
pub const BUILD_SCRIPT: &str = "hack/images/build.sh";

/// `$ICHOR_BUILD_DIR/images/<name>.tar` (which may not exist).
pub fn archive_path(name: &str) -> PathBuf {
    consumers::build_dir().join("images").join(format!("{name}.tar"))
}

/// The archive of `name` if it is there; the consumers' rule for a missing one
/// ([`consumers::require_path`]).
pub fn require_archive(name: &str) -> Option<PathBuf> {
    consumers::require_path(archive_path(name), BUILD_SCRIPT)
}

/// One stage of a Dockerfile, as far as the image it makes is concerned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stage {
    /// The `AS` name (empty when the stage has none).
    pub name: String,
    /// The `FROM` image, build arguments substituted.
    pub base: String,
    /// The files `COPY` puts in, by their path in the image.
    pub files: BTreeSet<String>,
    /// `USER`.
    pub user: Option<String>,
    /// `ENTRYPOINT` (exec form).
    pub entrypoint: Vec<String>,
    /// `EXPOSE`, as `port/proto` (`tcp` when the Dockerfile names none).
    pub exposed: BTreeSet<String>,
}

/// The Dockerfile's stages in order, and its build arguments' defaults (the `ARG`s before the
/// first `FROM`).
pub fn dockerfile(text: &str) -> Result<(Vec<Stage>, BTreeMap<String, String>)> {
    let mut args = BTreeMap::new();
    let mut stages: Vec<Stage> = Vec::new();
    let mut logical = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && logical.is_empty()) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            logical.push_str(head);
            logical.push(' ');
            continue;
        }
        logical.push_str(trimmed);
        let instruction = std::mem::take(&mut logical);
        let (keyword, rest) = instruction
            .split_once(char::is_whitespace)
            .unwrap_or((instruction.as_str(), ""));
        let rest = rest.trim();
        let words: Vec<&str> = rest.split_whitespace().collect();
        match keyword.to_ascii_uppercase().as_str() {
            "ARG" if stages.is_empty() => {
                let (name, default) = rest.split_once('=').unwrap_or((rest, ""));
                args.insert(name.to_owned(), default.to_owned());
            }
            "FROM" => {
                let base = substitute(words.first().copied().unwrap_or_default(), &args);
                let name = match words.as_slice() {
                    [_, as_, name] if as_.eq_ignore_ascii_case("as") => (*name).to_owned(),
                    _ => String::new(),
                };
                stages.push(Stage {
                    name,
                    base,
                    ..Stage::default()
                });
            }
            keyword => {
                let stage = stages
                    .last_mut()
                    .with_context(|| format!("Dockerfile: {keyword} before any FROM"))?;
                match keyword {
                    "COPY" => {
                        let paths: Vec<&str> =
                            words.iter().copied().filter(|w| !w.starts_with("--")).collect();
                        let [sources @ .., dest] = paths.as_slice() else {
                            bail!("Dockerfile: COPY without a destination: {rest}");
                        };
                        ensure!(!sources.is_empty(), "Dockerfile: COPY without a source: {rest}");
                        for source in sources {
                            let file = if dest.ends_with('/') || sources.len() > 1 {
                                let base = source.rsplit('/').next().unwrap_or(source);
                                format!("{}/{base}", dest.trim_end_matches('/'))
                            } else {
                                (*dest).to_owned()
                            };
                            stage.files.insert(file);
                        }
                    }
                    "USER" => stage.user = Some(rest.to_owned()),
                    "EXPOSE" => stage.exposed.extend(words.iter().map(|port| {
                        if port.contains('/') {
                            (*port).to_owned()
                        } else {
                            format!("{port}/tcp")
                        }
                    })),
                    "ENTRYPOINT" => {
                        stage.entrypoint = serde_json::from_str(rest).with_context(|| {
                            format!("Dockerfile: ENTRYPOINT is not the exec form: {rest}")
                        })?;
                    }
                    _ => {}
                }
            }
        }
    }
    Ok((stages, args))
}

/// `${NAME}` and `$NAME` replaced by the build argument's default.
fn substitute(word: &str, args: &BTreeMap<String, String>) -> String {
    args.iter().fold(word.to_owned(), |acc, (name, value)| {
        acc.replace(&format!("${{{name}}}"), value)
            .replace(&format!("${name}"), value)
    })
}

/// What a layer entry is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link, with its target.
    Symlink(String),
}

/// One entry of the image's layer, as `tar --numeric-owner --full-time -tv` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The absolute path in the image (`/etc/passwd`).
    pub path: String,
    /// Directory, file or symlink.
    pub kind: Kind,
    /// The permission bits, with setuid, setgid and sticky.
    pub mode: u32,
    /// The numeric owner.
    pub uid: u32,
    /// The numeric group.
    pub gid: u32,
    /// The size in bytes.
    pub size: u64,
    /// The modification time as tar prints it (`1970-01-01 00:00:00`).
    pub mtime: String,
}

/// An image archive, unpacked into a directory of its own (removed on drop), its layer unpacked
/// as a root file system there.
#[derive(Debug)]
pub struct Image {
    /// `io.containerd.image.name` of the index's one manifest (`ghcr.io/maesh/ichor-issuer:0.1.0`).
    pub reference: String,
    /// `org.opencontainers.image.ref.name` (the tag).
    pub ref_name: String,
    /// The manifest's digest (`sha256:…`).
    pub digest: String,
    /// The image configuration (the `config` object of the config blob).
    pub config: Value,
    /// The layer's entries in archive order.
    pub entries: Vec<Entry>,
    rootfs: PathBuf,
    _dir: tempfile::TempDir,
}

impl Image {
    /// Unpacks `archive`, checks each blob's digest and the layer's `diff_id`, lists the layer
    /// and unpacks it (modes and numeric owners kept; owners only as root). The archive must
    /// hold one image of one layer, as `hack/images/build.sh` writes.
    pub fn open(archive: &Path) -> Result<Self> {
        let dir = tempfile::tempdir()?;
        run(Command::new("tar")
            .arg("-xf")
            .arg(archive)
            .arg("-C")
            .arg(dir.path()))?;
        let read_json = |path: PathBuf| -> Result<Value> {
            let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_slice(&text).with_context(|| format!("{} is not JSON", path.display()))
        };
        let layout = read_json(dir.path().join("oci-layout"))?;
        ensure!(
            layout["imageLayoutVersion"] == "1.0.0",
            "{}: oci-layout is {layout}",
            archive.display()
        );
        let blobs = dir.path().join("blobs/sha256");
        let sums = run(Command::new("sh")
            .args(["-c", "cd \"$1\" && sha256sum -- *", "sh"])
            .arg(&blobs))?;
        for line in sums.lines() {
            let (sum, name) = line.split_once("  ").context("sha256sum output")?;
            ensure!(
                sum == name,
                "{}: blob {name} has the digest {sum}",
                archive.display()
            );
        }
        let blob = |digest: &str| -> Result<PathBuf> {
            let hex = digest
                .strip_prefix("sha256:")
                .with_context(|| format!("{}: digest {digest} is not sha256", archive.display()))?;
            Ok(blobs.join(hex))
        };

        let index = read_json(dir.path().join("index.json"))?;
        let manifests = index["manifests"]
            .as_array()
            .context("index.json: no manifests")?;
        let [descriptor] = manifests.as_slice() else {
            bail!(
                "{}: index.json has {} manifests, not one",
                archive.display(),
                manifests.len()
            );
        };
        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
        let digest = text(&descriptor["digest"]);
        let manifest = read_json(blob(&digest)?)?;
        let config_blob = read_json(blob(manifest["config"]["digest"].as_str().unwrap_or_default())?)?;
        let layers = manifest["layers"].as_array().context("manifest: no layers")?;
        let [layer] = layers.as_slice() else {
            bail!("{}: {} layers, not one", archive.display(), layers.len());
        };
        ensure!(
            layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip",
            "{}: layer media type {}",
            archive.display(),
            layer["mediaType"]
        );
        let layer = blob(layer["digest"].as_str().unwrap_or_default())?;
        let diff_id = run(Command::new("sh")
            .args(["-c", "gzip -dc \"$1\" | sha256sum", "sh"])
            .arg(&layer))?;
        let diff_id = format!("sha256:{}", diff_id.split_whitespace().next().unwrap_or_default());
        ensure!(
            config_blob["rootfs"]["diff_ids"] == serde_json::json!([diff_id]),
            "{}: the config's diff_ids {} are not the layer's {diff_id}",
            archive.display(),
            config_blob["rootfs"]["diff_ids"]
        );
        let listing = run(Command::new("tar")
            .args(["--numeric-owner", "--full-time", "-tvzf"])
            .arg(&layer))?;
        let entries = listing
            .lines()
            .map(parse_entry)
            .collect::<Result<Vec<_>>>()
            .with_context(|| format!("listing the layer of {}", archive.display()))?;
        let rootfs = dir.path().join("rootfs");
        std::fs::create_dir(&rootfs)?;
        run(Command::new("tar")
            .args(["--numeric-owner", "-xpzf"])
            .arg(&layer)
            .arg("-C")
            .arg(&rootfs))?;
        Ok(Self {
            reference: text(&descriptor["annotations"]["io.containerd.image.name"]),
            ref_name: text(&descriptor["annotations"]["org.opencontainers.image.ref.name"]),
            digest,
            config: config_blob["config"].clone(),
            entries,
            rootfs,
            _dir: dir,
        })
    }

    /// The entry at `path`, if any.
    pub fn entry(&self, path: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.path == path)
    }

    /// The entry `path` leads to, following symlinks inside the image (at most 8).
    pub fn resolve(&self, path: &str) -> Option<&Entry> {
        let mut path = path.to_owned();
        for _ in 0..8 {
            let entry = self.entry(&path)?;
            let Kind::Symlink(target) = &entry.kind else {
                return Some(entry);
            };
            path = if target.starts_with('/') {
                target.clone()
            } else {
                let dir = Path::new(&path).parent().unwrap_or(Path::new("/"));
                normalize(&dir.join(target))
            };
        }
        None
    }

    /// The contents of the regular file at `path` (not through a symlink: the image's absolute
    /// links point into the machine's own tree here).
    pub fn read(&self, path: &str) -> Result<Vec<u8>> {
        let entry = self
            .entry(path)
            .with_context(|| format!("{path} is not in the image"))?;
        ensure!(
            entry.kind == Kind::File,
            "{path} is not a regular file in the image"
        );
        let file = self.rootfs.join(path.trim_start_matches('/'));
        std::fs::read(&file).with_context(|| format!("reading {}", file.display()))
    }

    /// The unpacked root file system (the caller's scratch copy: a test may add to it, such as
    /// the `/proc` mount point a runtime creates).
    pub fn rootfs(&self) -> &Path {
        &self.rootfs
    }

    /// The configuration's string at `key` (`User`, `WorkingDir`).
    pub fn config_str(&self, key: &str) -> Option<&str> {
        self.config[key].as_str()
    }

    /// The configuration's list of strings at `key` (`Entrypoint`, `Env`).
    pub fn config_list(&self, key: &str) -> Vec<String> {
        self.config[key]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The keys of `ExposedPorts` (`8443/tcp`).
    pub fn exposed_ports(&self) -> BTreeSet<String> {
        self.config["ExposedPorts"]
            .as_object()
            .map(|ports| ports.keys().cloned().collect())
            .unwrap_or_default()
    }
}

/// `a/./b/../c` as `a/c`, without touching the file system.
fn normalize(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    format!("/{}", parts.join("/"))
}

/// One line of `tar --numeric-owner --full-time -tv`:
/// `drwx------ 65532/65532 0 1970-01-01 00:00:00 home/nonroot/`.
fn parse_entry(line: &str) -> Result<Entry> {
    let parse = || -> Option<Entry> {
        let mut words = line.split_whitespace();
        let perms = words.next()?;
        let (uid, gid) = words.next()?.split_once('/')?;
        let size = words.next()?.parse().ok()?;
        let mtime = format!("{} {}", words.next()?, words.next()?);
        let name: Vec<&str> = words.collect();
        let (path, kind) = match (perms.chars().next()?, name.as_slice()) {
            ('d', [path]) => (path.trim_end_matches('/'), Kind::Dir),
            ('-', [path]) => (*path, Kind::File),
            ('l', [path, "->", target]) => (*path, Kind::Symlink((*target).to_owned())),
            _ => return None,
        };
        Some(Entry {
            path: format!("/{path}"),
            kind,
            mode: mode_bits(perms)?,
            uid: uid.parse().ok()?,
            gid: gid.parse().ok()?,
            size,
            mtime,
        })
    };
    parse().with_context(|| format!("cannot read the tar line '{line}'"))
}

/// `drwxrwxrwt` as 0o1777.
fn mode_bits(perms: &str) -> Option<u32> {
    let chars: Vec<char> = perms.chars().collect();
    let [_, bits @ ..] = chars.as_slice() else {
        return None;
    };
    if bits.len() != 9 {
        return None;
    }
    let mut mode = 0;
    for (i, c) in bits.iter().enumerate() {
        let bit = 1 << (8 - i);
        let special = match i {
            2 => 0o4000,
            5 => 0o2000,
            8 => 0o1000,
            _ => 0,
        };
        match c {
            '-' => {}
            'r' | 'w' | 'x' => mode |= bit,
            's' | 't' => mode |= bit | special,
            'S' | 'T' => mode |= special,
            _ => return None,
        }
    }
    Some(mode)
}

/// Runs `command`, its stdout as text; an error with its stderr when it fails.
fn run(command: &mut Command) -> Result<String> {
    let output = command
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("starting {command:?}"))?;
    ensure!(
        output.status.success(),
        "{command:?} failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_modes_tar_prints() {
        assert_eq!(mode_bits("drwxrwxrwt"), Some(0o1777));
        assert_eq!(mode_bits("drwx------"), Some(0o700));
        assert_eq!(mode_bits("-rwsr-xr-x"), Some(0o4755));
        assert_eq!(mode_bits("-rw-r--r-T"), Some(0o1644));
        assert_eq!(mode_bits("-rw-r--r-"), None);
    }

    #[test]
    fn reads_a_symlink_line() {
        let entry =
            parse_entry("lrwxrwxrwx 0/0               0 1970-01-01 00:00:00 lib64/ld.so.2 -> /lib/ld.so.2")
                .expect("a symlink line");
        assert_eq!(entry.path, "/lib64/ld.so.2");
        assert_eq!(entry.kind, Kind::Symlink("/lib/ld.so.2".into()));
        assert!(parse_entry("hrw-r--r-- 0/0 0 1970-01-01 00:00:00 a link to b").is_err());
    }

    #[test]
    fn copy_destinations_and_exposed_ports_follow_docker_s_rules() {
        let (stages, args) = dockerfile(
            "ARG BASE=img:1\nFROM x AS build\nRUN a \\\n  b\nFROM ${BASE} AS app\n\
             COPY --from=build /out/a /out/b /usr/bin/\nCOPY --from=build /out/c /bin/cc\n\
             USER 1:1\nEXPOSE 80 53/udp\nENTRYPOINT [\"/bin/cc\"]\n",
        )
        .expect("parses");
        assert_eq!(args["BASE"], "img:1");
        let app = &stages[1];
        assert_eq!((app.name.as_str(), app.base.as_str()), ("app", "img:1"));
        assert_eq!(
            app.files.iter().map(String::as_str).collect::<Vec<_>>(),
            ["/bin/cc", "/usr/bin/a", "/usr/bin/b"]
        );
        assert_eq!(app.user.as_deref(), Some("1:1"));
        assert_eq!(
            app.exposed.iter().map(String::as_str).collect::<Vec<_>>(),
            ["53/udp", "80/tcp"]
        );
        assert_eq!(app.entrypoint, ["/bin/cc"]);
    }
}
