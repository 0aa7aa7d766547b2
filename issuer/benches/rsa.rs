//! RSA-3072 PKCS#1 v1.5 SHA-256 signing (RS256), one thread, by each implementation this
//! workspace links: the issuer's [`Rs256Signer`] (AWS-LC), OpenSSL through josekit (a fresh
//! context per signature), OpenSSL through the `openssl` crate's `Signer` (the same), and ring
//! (linked by rustls). The same key
//! (`tests/fixtures/rsa3072-1.pkcs8.pem`) and the same 600-byte input, the size of an ID token's
//! signing input.
//!
//! On a shared machine the load drifts over seconds, so the implementations are interleaved:
//! each round signs `BATCH` times with each, in turn, and the report gives each one's median
//! rate over the rounds and its ratio to the issuer's signer's in the same rounds. Prints one
//! `rsa signer=… sign_per_s=… of_issuer=…` line per implementation; `hack/bench/rsa.sh` sets them
//! against `openssl speed rsa3072` measured in the same run.
//!
//! Environment: `RSA_BENCH_ROUNDS` (default 40).
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::hint::black_box;
use std::time::Instant;

use ichor_issuer::keys::Rs256Signer;
use josekit::jws::{JwsSigner, RS256};

const PEM: &str = include_str!("../tests/fixtures/rsa3072-1.pkcs8.pem");
const BATCH: usize = 20;

/// An implementation under test: its name and one signature of the shared input.
type Signer<'a> = (&'static str, Box<dyn FnMut() + 'a>);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let rounds: usize = std::env::var("RSA_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
        .max(1);
    let msg: Vec<u8> = (0..600u32)
        .map(|i| b'a' + u8::try_from(i % 26).unwrap())
        .collect();

    let issuer = Rs256Signer::from_pem(PEM.as_bytes()).unwrap();
    let josekit = RS256.signer_from_pem(PEM).unwrap();
    let pkey = openssl::pkey::PKey::private_key_from_pem(PEM.as_bytes()).unwrap();
    let der = pem::parse(PEM).unwrap();
    let ring_key = ring::rsa::KeyPair::from_pkcs8(der.contents()).unwrap();
    let rng = ring::rand::SystemRandom::new();
    let mut ring_sig = vec![0u8; ring_key.public().modulus_len()];

    let mut sign: Vec<Signer<'_>> = vec![
        (
            "issuer",
            Box::new(|| {
                black_box(issuer.sign(&msg).unwrap());
            }),
        ),
        (
            "josekit",
            Box::new(|| {
                black_box(josekit.sign(&msg).unwrap());
            }),
        ),
        (
            "openssl-crate",
            Box::new(|| {
                let mut signer =
                    openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), &pkey).unwrap();
                signer.update(&msg).unwrap();
                black_box(signer.sign_to_vec().unwrap());
            }),
        ),
        (
            "ring",
            Box::new(|| {
                ring_key
                    .sign(&ring::signature::RSA_PKCS1_SHA256, &rng, &msg, &mut ring_sig)
                    .unwrap();
                black_box(&ring_sig);
            }),
        ),
    ];
    // Per implementation: its rate in each round, and that rate over the issuer's in the same round.
    let mut rates = vec![Vec::with_capacity(rounds); sign.len()];
    let mut relative = vec![Vec::with_capacity(rounds); sign.len()];
    for round in 0..=rounds {
        let mut this_round = Vec::with_capacity(sign.len());
        for (_, f) in &mut sign {
            let t = Instant::now();
            for _ in 0..BATCH {
                f();
            }
            this_round.push(BATCH as f64 / t.elapsed().as_secs_f64());
        }
        if round == 0 {
            continue; // warm-up
        }
        for (i, r) in this_round.iter().enumerate() {
            rates[i].push(*r);
            relative[i].push(r / this_round[0]);
        }
    }
    for (i, (name, _)) in sign.iter().enumerate() {
        println!(
            "rsa signer={name} sign_per_s={:.1} of_issuer={:.3} rounds={rounds}",
            median(rates[i].clone()),
            median(relative[i].clone())
        );
    }
}
