//! The committed seeds as regression tests: every file in `fuzz/corpus/<target>/` goes through
//! the function the target's fuzz binary calls (`ichor_fuzz_targets::TARGETS`), on the normal
//! toolchain, without libFuzzer or sanitizers. A failing seed is named with its panic.

use std::{
    collections::BTreeSet,
    fs,
    panic::{self, AssertUnwindSafe},
    path::{Path, PathBuf},
};

use ichor_fuzz_targets::TARGETS;

/// The `fuzz/` directory.
fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("fuzz/targets has a parent")
        .to_path_buf()
}

/// The names of the entries of `dir` (files when `files`, else directories), sorted.
fn names(dir: &Path, files: bool) -> BTreeSet<String> {
    fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry"))
        .filter(|entry| entry.file_type().expect("file type").is_file() == files)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Runs every seed of `name` and fails naming each seed that panicked.
fn corpus(name: &str) {
    let target = TARGETS
        .iter()
        .find(|t| t.name == name)
        .unwrap_or_else(|| panic!("no target {name} in TARGETS"));
    let dir = fuzz_dir().join("corpus").join(name);
    let seeds = names(&dir, true);
    assert!(!seeds.is_empty(), "no seed in {}", dir.display());
    let failed: Vec<_> = seeds
        .iter()
        .filter(|seed| {
            let data = fs::read(dir.join(seed)).expect("read seed");
            panic::catch_unwind(AssertUnwindSafe(|| (target.run)(&data))).is_err()
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} seeds of {name} failed (panics above): {failed:?}",
        failed.len(),
        seeds.len()
    );
}

macro_rules! corpus_tests {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                corpus(stringify!($name));
            }
        )*

        /// The targets here, in `TARGETS`, in `fuzz/fuzz_targets/` and in `fuzz/corpus/` are the
        /// same, so no seed directory or target goes untested.
        #[test]
        fn every_target_has_its_seeds_and_a_test() {
            let here: BTreeSet<String> = [$(stringify!($name)),*].into_iter().map(String::from).collect();
            let listed: BTreeSet<String> = TARGETS.iter().map(|t| t.name.to_owned()).collect();
            let binaries: BTreeSet<String> = names(&fuzz_dir().join("fuzz_targets"), true)
                .into_iter()
                .filter_map(|file| file.strip_suffix(".rs").map(String::from))
                .collect();
            let corpora = names(&fuzz_dir().join("corpus"), false);
            assert_eq!(listed, here, "TARGETS and the tests here");
            assert_eq!(binaries, here, "fuzz/fuzz_targets/ and the tests here");
            assert_eq!(corpora, here, "fuzz/corpus/ and the tests here");
        }
    };
}

corpus_tests!(
    admission_review,
    authn_config,
    cli_oidc_responses,
    credentials_entry,
    credentials_entry_v2,
    exec_credential_cache,
    jws_tokens,
    keys_json,
    kubeconfig,
    oidc_authorize_query,
    oidc_factor_form,
    oidc_revoke_form,
    oidc_token_form,
    talos_machine_config,
    totp_code,
    user_service_grpc,
    webauthn_responses,
);
