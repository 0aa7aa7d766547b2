//! gRPC calls as the UI makes them: a `UserService` request carrying a bearer token.

/// `message` as a request with `authorization: Bearer <token>`.
pub fn bearer_request<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("a token is ASCII"),
    );
    request
}
