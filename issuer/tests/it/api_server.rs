//! `UserService` through a real tonic server on 127.0.0.1: the generated client over gRPC
//! (HTTP/2), and a browser-style gRPC-web request (HTTP/1.1) through `tonic_web::GrpcWebLayer`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use crate::api_common::*;
use ichor_issuer::api::{
    grpc_service,
    proto::{ListUsersRequest, WhoAmIRequest, WhoAmIResponse, user_service_client::UserServiceClient},
};
use prost::Message as _;
use tonic::Code;

/// A gRPC-web frame: flag byte, big-endian length, payload.
fn frame(flag: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![flag];
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// Splits a gRPC-web response body into its frames.
fn frames(mut body: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while body.len() >= 5 {
        let len = u32::from_be_bytes(body[1..5].try_into().unwrap()) as usize;
        out.push((body[0], body[5..5 + len].to_vec()));
        body = &body[5 + len..];
    }
    assert!(body.is_empty(), "trailing bytes");
    out
}

#[tokio::test]
async fn the_generated_client_and_a_grpc_web_request_reach_the_service_over_tcp() {
    let e = env();
    e.cast().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .accept_http1(true)
            .layer(tonic_web::GrpcWebLayer::new())
            .add_service(grpc_service(e.api.clone()))
            .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener), async {
                stopped.await.ok();
            }),
    );
    let bearer = format!("Bearer {}", token("admin", e.clock.now_ts()));

    // gRPC with the generated client.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = UserServiceClient::new(channel);
    let mut request = tonic::Request::new(WhoAmIRequest {});
    request
        .metadata_mut()
        .insert("authorization", bearer.parse().unwrap());
    let me = client.who_am_i(request).await.unwrap().into_inner();
    assert_eq!(
        (me.name.as_str(), me.roles.as_slice()),
        ("admin", &["admin".to_owned()][..])
    );
    let refused = client.list_users(ListUsersRequest {}).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "{refused:?}");

    // gRPC-web, as the browser sends it.
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/ichor.v1alpha1.UserService/WhoAmI"))
        .header("content-type", "application/grpc-web+proto")
        .header("x-grpc-web", "1")
        .header("authorization", &bearer)
        .body(frame(0, &WhoAmIRequest {}.encode_to_vec()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let content_type = response.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("application/grpc-web"), "{content_type}");
    let body = response.bytes().await.unwrap();
    let frames = frames(&body);
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[0].0, 0, "first frame is data");
    let me = WhoAmIResponse::decode(frames[0].1.as_slice()).unwrap();
    assert_eq!(me.name, "admin");
    assert_eq!(frames[1].0, 0x80, "second frame is trailers");
    let trailers = String::from_utf8(frames[1].1.clone()).unwrap();
    assert!(trailers.contains("grpc-status:0"), "{trailers}");

    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}
