//! Cost of password hashing at production parameters (argon2id m=64 MiB, t=3, p=4, `parallel`):
//! hashing, verifying a known user's right and wrong password, and the dummy verify an unknown
//! user costs, so the three verify paths can be compared.
//!
//! `cargo bench -p ichor-renderers --bench auth`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use ichor_renderers::auth::Password;
use ichor_renderers::auth::hash::{hash_password, verify_dummy, verify_password};

fn password_hashing(c: &mut Criterion) {
    let password = Password::new("correct horse battery staple");
    let wrong = Password::new("correct horse battery stable");
    let salt = *b"bench-salt-16-by";
    let Ok(phc) = hash_password(&password, &salt) else {
        eprintln!("hashing failed; nothing to benchmark");
        return;
    };

    let mut group = c.benchmark_group("argon2id_m65536_t3_p4");
    group
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    group.bench_function("hash", |b| {
        b.iter(|| hash_password(black_box(&password), black_box(&salt)))
    });
    group.bench_function("verify_known_user_right_password", |b| {
        b.iter(|| verify_password(black_box(&password), black_box(&phc)))
    });
    group.bench_function("verify_known_user_wrong_password", |b| {
        b.iter(|| verify_password(black_box(&wrong), black_box(&phc)))
    });
    group.bench_function("verify_unknown_user_dummy", |b| {
        b.iter(|| verify_dummy(black_box(&wrong)))
    });
    group.finish();
}

criterion_group!(benches, password_hashing);
criterion_main!(benches);
