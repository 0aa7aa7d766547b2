//! The mixed workload's markdown report (what `hack/bench/load.sh` and `kube-store.sh` put in
//! their results): per endpoint and phase, p99 before vs during the flood, the issuer
//! processes, the flood's outcomes and the paced workload's errors.

use super::{CLASSES, Phase, flood::FLOOD_PER_LOOP};
use crate::stats::{ms, percentile};

pub(crate) fn report(issuers: usize, sustained: &Phase, flooded: &Phase, flood: usize) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Per endpoint ({issuers} issuers, requests alternating; paced rates in all)\n"
    );
    let _ = writeln!(
        out,
        "| endpoint | target/s | phase | ok | errors | shed (503 busy) | req/s | p50 ms | p99 ms | p999 ms | max ms |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
    for &(class, rate, _) in CLASSES {
        for p in [sustained, flooded] {
            let empty = Vec::new();
            let ok = p.record.ok.get(class).unwrap_or(&empty);
            let errors: usize = p.record.errors.get(class).map_or(0, |e| e.values().sum());
            let shed = p.record.shed.get(class).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "| {class} | {rate} | {} | {} | {errors} | {shed} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
                p.name,
                ok.len(),
                ok.len() as f64 / p.seconds,
                ms(percentile(ok, 50.0)),
                ms(percentile(ok, 99.0)),
                ms(percentile(ok, 99.9)),
                ms(ok.last().copied().unwrap_or_default()),
            );
        }
    }
    let _ = writeln!(
        out,
        "\n## p99 of the other endpoints, before vs during the login flood\n"
    );
    let _ = writeln!(out, "| endpoint | p99 sustained | p99 flood | ratio |");
    let _ = writeln!(out, "|---|---|---|---|");
    for &(class, _, _) in CLASSES.iter().filter(|c| !c.0.starts_with("sign-in")) {
        let empty = Vec::new();
        let p99 = |p: &Phase| ms(percentile(p.record.ok.get(class).unwrap_or(&empty), 99.0));
        let (before, during) = (p99(sustained), p99(flooded));
        let _ = writeln!(
            out,
            "| {class} | {before:.1} ms | {during:.1} ms | {:.1}x |",
            during / before.max(0.001)
        );
    }
    let _ = writeln!(out, "\n## Issuer processes\n");
    let _ = writeln!(
        out,
        "| issuer | VmHWM after sustained | VmHWM after flood | CPU sustained | CPU flood |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|");
    for i in 0..sustained.hwm.len() {
        let _ = writeln!(
            out,
            "| {} | {} MiB | {} MiB | {:.0} % | {:.0} % |",
            i + 1,
            sustained.hwm[i],
            flooded.hwm.get(i).copied().unwrap_or(0),
            100.0 * sustained.cpu[i],
            100.0 * flooded.cpu.get(i).copied().unwrap_or(0.0),
        );
    }
    let _ = writeln!(
        out,
        "\n## Flood outcomes ({flood} loops signing in as fast as answered, at most {FLOOD_PER_LOOP} attempts/s each, {:.1} s; a third with wrong passwords for ten users)\n",
        flooded.seconds
    );
    let _ = writeln!(out, "| outcome | count |");
    let _ = writeln!(out, "|---|---|");
    for (k, v) in &flooded.flood {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    let mut errors = String::new();
    for p in [sustained, flooded] {
        for (class, e) in &p.record.errors {
            for (m, n) in e {
                let _ = writeln!(errors, "{} {class} x{n}: {m}", p.name);
            }
        }
    }
    if !errors.is_empty() {
        let _ = writeln!(out, "\n## Errors of the paced workload\n\n```\n{errors}```");
    }
    out
}
