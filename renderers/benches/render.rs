//! Cost of a full render of one cluster (Ichor issuer + three external providers, three control
//! planes and two workers): build, validate and serialise the `KubeAuthenticationConfig`, hash
//! it, classify every machine and plan the rollout. Also the manifest parse of the fixture, so
//! `ichor render`'s whole cost is visible.
//!
//! `cargo bench -p ichor-renderers --bench render`

use std::{hint::black_box, path::Path, time::Duration};

use criterion::{Criterion, criterion_group, criterion_main};
use ichor_renderers::{
    auth::second_factor_policy::SecondFactorPolicy,
    cluster::render_cluster,
    manifest::{parse_file, parse_files},
    trust::IssuerTrust,
};

/// The files of the fixture directory.
const FIXTURE_FILES: [&str; 5] = [
    "cluster.yaml",
    "installation.yaml",
    "machines.yaml",
    "trust.yaml",
    "users.yaml",
];

fn full_render(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../golden/fixtures/ichor-and-externals");
    let mut files = Vec::with_capacity(FIXTURE_FILES.len());
    for name in FIXTURE_FILES {
        match std::fs::read(dir.join(name)) {
            Ok(bytes) => files.push((name, bytes)),
            Err(e) => {
                eprintln!("cannot read the fixture file {name}: {e}; nothing to benchmark");
                return;
            }
        }
    }
    let Ok(m) = parse_files(files.iter().map(|(name, bytes)| (*name, bytes.as_slice()))) else {
        eprintln!(
            "the fixture {} does not load; nothing to benchmark",
            dir.display()
        );
        return;
    };
    let trust = m
        .configmaps
        .iter()
        .find_map(|cm| IssuerTrust::from_configmap(cm).ok());
    let cluster = &m.clusters[0];

    let mut group = c.benchmark_group("render");
    group
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    group.bench_function("one_cluster", |b| {
        b.iter(|| {
            render_cluster(
                black_box(cluster),
                black_box(&m.machines),
                black_box(trust.as_ref()),
                black_box(&SecondFactorPolicy::default()),
            )
        })
    });
    let cluster_yaml = &files[0].1;
    group.bench_function("parse_cluster_manifest", |b| {
        b.iter(|| parse_file(black_box("cluster.yaml"), black_box(cluster_yaml)))
    });
    group.finish();
}

criterion_group!(benches, full_render);
criterion_main!(benches);
