# syntax=docker/dockerfile:1
#
# The Ichor images: one build stage compiles the three binaries of the workspace, and one small
# final stage per binary copies it onto distroless (glibc and libgcc only, no shell, no package
# manager), running as the `nonroot` user (65532:65532), which the chart's securityContext
# expects. The web UI is the committed ui/dist, embedded at compile time: no Node.js or npm here.
# See hack/images/README.md.
#
#   docker build --target ichor-controller -t ghcr.io/maesh/ichor-controller:0.1.0 .
#   docker build --target ichor-issuer     -t ghcr.io/maesh/ichor-issuer:0.1.0 .
#   docker build --target ichor            -t ghcr.io/maesh/ichor:0.1.0 .

ARG RUST_VERSION=1.89
ARG DISTROLESS=gcr.io/distroless/cc-debian12:nonroot

# --- build: the workspace, release profile, Cargo.lock as committed ------------------------------
# bookworm, like the final stage (Debian 12), so the binaries link against the same glibc.
FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# `ichor` is a build of its own: built with the others, cargo would unify the issuer's features
# and link kube-runtime (the issuer's IchorInstallation watch) into the kubectl exec plugin.
# `ichor` itself (the exec plugin; `ichor-full` has the commands) is then linked again
# static-pie, still PIE with full RELRO, so it starts like /bin/true: the flag applies to that
# one crate's link, nothing else is rebuilt. It reads one file and execs; no NSS, no DNS.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked \
        -p ichor-controller --bin ichor-controller \
        -p ichor-issuer --bin ichor-issuer \
    && cargo build --release --locked -p ichor-cli --bin ichor --bin ichor-full \
    && cargo rustc --release --locked -p ichor-cli --bin ichor -- -C target-feature=+crt-static \
    && mkdir -p /out \
    && cp target/release/ichor-controller target/release/ichor-issuer target/release/ichor \
        target/release/ichor-full /out/

# --- ichor-controller ------------------------------------------------------------------------
FROM ${DISTROLESS} AS ichor-controller
COPY --from=build /out/ichor-controller /usr/local/bin/ichor-controller
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/ichor-controller"]

# --- ichor-issuer ----------------------------------------------------------------------------
FROM ${DISTROLESS} AS ichor-issuer
COPY --from=build /out/ichor-issuer /usr/local/bin/ichor-issuer
USER 65532:65532
EXPOSE 8443 8444
ENTRYPOINT ["/usr/local/bin/ichor-issuer"]

# --- ichor (the CLI; also the default target) ------------------------------------------------
# `ichor` answers a cached `ichor auth token` itself and runs `ichor-full`, which must be in the
# same directory, for every other command.
FROM ${DISTROLESS} AS ichor
COPY --from=build /out/ichor /out/ichor-full /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/ichor"]
